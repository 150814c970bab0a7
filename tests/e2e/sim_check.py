"""Pass/fail counting for the simulator's e2e Python scripts: one line per
check, then "N passed, N failed" and exit status 1 on any failure."""
import sys


class Checks:
    def __init__(self, label):
        self.label, self.passed, self.failed = label, 0, 0

    def check(self, name, cond, detail=""):
        if cond:
            self.passed += 1
        else:
            self.failed += 1
        print(f"{'ok  ' if cond else 'FAIL'} {self.label}: {name} {'' if cond else detail}")

    def run(self, *steps):
        """Runs each step; an exception fails that step, the rest still run."""
        for f in steps:
            try:
                f()
            except Exception as e:
                self.check(f"{f.__name__} raised", False, repr(e))
        print(f"{self.passed} passed, {self.failed} failed")
        sys.exit(1 if self.failed else 0)
