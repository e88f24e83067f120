"""Thin ROS 2 layer: nodes, action clients and servers, parameters and message conversion."""
