"""What is measured: tasks and members (`tasks`), their declared specs (`specs`), the task output schema
(`outschema`), source documents and their integrity (`sources`, `rasterize`), public data sets (`datasets`),
the catalog of declared metrics (`metrics`)."""
