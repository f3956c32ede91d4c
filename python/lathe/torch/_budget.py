"""A time budget for the first call of one dynamo graph: partitioning, tracing and compiling its
Lathe subgraphs. Past it, the whole graph runs in PyTorch (one warning) instead of the first call
taking unboundedly long. LATHE_TORCH_COMPILE_BUDGET_S sets it (seconds, default 120; 0 or less
falls back at once)."""
import logging
import os
import time

logger = logging.getLogger("lathe.torch")

DEFAULT_BUDGET_S = 120.0


class BudgetExceeded(Exception):
    """Raised inside a Lathe trace once the budget is spent; the subgraph then runs PyTorch."""


class CompileBudget:
    def __init__(self, graph_name):
        self.graph_name = graph_name
        self.seconds = float(os.environ.get("LATHE_TORCH_COMPILE_BUDGET_S", DEFAULT_BUDGET_S))
        self.start = time.monotonic()
        self.active = True  # until the graph's first call returns
        self.exceeded = False  # once set, every subgraph of the graph runs in PyTorch

    def check(self):
        """True when the budget is spent (logs once); only during the first call."""
        if self.exceeded:
            return True
        if not self.active or time.monotonic() - self.start <= self.seconds:
            return False
        self.exceeded = True
        logger.warning("[lathe.torch] %s: compiling took more than %g s "
                       "(LATHE_TORCH_COMPILE_BUDGET_S); running the graph in PyTorch",
                       self.graph_name, self.seconds)
        return True

    def check_in_trace(self):
        if self.check():
            raise BudgetExceeded(self.graph_name)

    def finish(self):
        self.active = False
