"""Evaluation of grammar-aligned sampling (BRIEF §5): tasks, metrics, checkers, plots, CLI.

``gad.eval.run(tasks, methods, n, model=..., out_dir=...)`` — see :mod:`gad.eval.harness`.
"""

from gad.eval.harness import method_names, register_method, run, toy_model
from gad.eval.tasks import Task, get_task, register_task, task_names

__all__ = ["run", "register_method", "method_names", "toy_model", "Task", "get_task", "register_task",
           "task_names"]
