"""Client-side helpers for tests: send a goal / get its result, spinning the client's executor
on the calling thread (the thread that makes the requests spins: no rclpy#1123 race)."""

from __future__ import annotations


def send(client, executor, goal, feedback=None, timeout: float = 10.0):
    """The goal handle (None if no answer within timeout)."""
    future = client.send_goal_async(goal, feedback_callback=feedback)
    executor.spin_until_future_complete(future, timeout_sec=timeout)
    return future.result()


def result(executor, handle, timeout: float = 20.0):
    """The GetResult response of an accepted goal; fails the test if none arrives in time."""
    future = handle.get_result_async()
    executor.spin_until_future_complete(future, timeout_sec=timeout)
    assert future.done(), f"no result within {timeout} s"
    return future.result()
