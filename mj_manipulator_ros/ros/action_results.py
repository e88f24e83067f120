"""How long an action server keeps a finished goal's result for its client.

rclpy's ``ActionServer`` forgets a goal ``result_timeout`` seconds after it ended (10 s by
default in the rclpy of Jazzy and Kilted; rclcpp's default is 15 minutes). A client whose
``get_result`` request reaches the server later (a loaded machine, a client that asks only when
it needs the result) gets ``STATUS_UNKNOWN`` with an empty result, and the server logs "Sending
result response for unknown or expired goal ID": the goal's real outcome is lost to it. Every
action server of this package keeps results as long as rclcpp's servers do.
"""

#: seconds a finished goal's result stays available (rclcpp's default, 15 minutes)
RESULT_TIMEOUT_S = 900


def release_request(goal_handle) -> None:
    """Drop a finished goal's request message from its rclpy goal handle.

    The server keeps the handle (for its result) ``RESULT_TIMEOUT_S`` after the goal ended, and
    with it the request: for a 601-point trajectory about 3,000 Python objects that every full
    garbage collection of the process scans (``core/heap.py``: such pauses grew past 190 ms on a
    loaded machine). Nothing reads the request once the execute callback has converted it; the
    result, status and goal id are kept. rclpy (Humble to Kilted) keeps it in
    ``ServerGoalHandle._goal_request``; a version without that attribute keeps its request."""
    if hasattr(goal_handle, "_goal_request"):
        goal_handle._goal_request = None
