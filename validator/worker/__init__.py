"""Running untrusted student code in a separate process.

main.py is the worker's entry point (student code is imported there only);
client.py is the grader's handle on it; protocol.py is the wire format both
speak. The grader never unpickles what the worker sends: tensors travel as a
dtype, a shape and raw bytes.
"""
