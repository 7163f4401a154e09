"""Restart & replay: the resume plan (a frozen, versioned type), its files, the startup stub, the
request to the frontend, and the replay in the restarted kernel. Joined to the rest by frozen types:
a Diagnosis in, a ResumePlan out.
"""
