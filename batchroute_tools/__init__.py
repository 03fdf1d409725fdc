"""Developer tools that sit beside the service: the local stack runner and admin commands.

Not deployed: nothing under functions/ or the layer imports from here.
"""
