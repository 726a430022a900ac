"""Head roles on the dashboard: the roles job, colouring, protection and the probe view."""
