"""The pages that show an incident together with its snapshots.

A thin layer above both apps: views and templates that wire incidents' and collectors'
selectors and services together, and no rule of their own. Nothing below imports it.
"""
