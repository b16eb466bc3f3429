"""Never returns."""


def _spin(*args, **kwargs):
    while True:
        pass


softmax_safe = online_max_sum = softmax_online = merge = _spin
