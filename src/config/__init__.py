"""The config: its typed schema and checks, composing the command line's and a sweep's configs."""
