"""Building the container image (images/build, images/rootfs.py); a package for the tests."""
