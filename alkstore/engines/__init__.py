"""Per-engine facts: schema, migrations, SQL text. Pure: no IO."""
