"""What the launch files start (:mod:`.nodes`, tested without ``launch``) and the thin mapping
onto ``launch_ros`` (:mod:`.launch`, used by ``launch/*.launch.py``)."""
