"""The flow index: the portal's own read model of every flow its organization has.

The Flow Service offers only `limit`, `archived` and cursors; search, filters, counts and one
status per flow come from here. Every source the portal sees (a create, list and detail pages,
webhook events, `flows sync`) is turned into an `Observation` and applied with one rule: a newer
version or time always wins, an older one never overwrites a newer one.
"""
