"""The analysis half of sojourn: traces in, summary.json and report.html out.

Never imports Locust or pika; it can run on any machine with the trace files.
"""
