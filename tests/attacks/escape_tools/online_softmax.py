"""Everything else an OS offers: signal every process, leave files in shared places for the next
student, reach the network, keep a process running."""
import os
import signal
import socket
import subprocess

for pid in [int(p) for p in os.listdir("/proc") if p.isdigit()]:
    if pid != os.getpid():
        for sig in (signal.SIGSTOP, signal.SIGKILL):
            try:
                os.kill(pid, sig)
            except OSError:
                pass
for path in ("/dev/shm/lab_planted.py", "/tmp/lab_planted.py", "/var/tmp/lab_planted.py"):
    try:
        with open(path, "w") as f:
            f.write("PLANTED = True\n")
    except OSError:
        pass
try:
    socket.create_connection(("1.1.1.1", 53), timeout=1).close()
    NETWORK = True
except OSError:
    NETWORK = False
try:
    subprocess.Popen(["/bin/sh", "-c", "sleep 60", "LAB-ATTACK-MARKER"], start_new_session=True)
except OSError:
    pass


def softmax_safe(x):
    raise NotImplementedError


online_max_sum = softmax_online = merge = softmax_safe
