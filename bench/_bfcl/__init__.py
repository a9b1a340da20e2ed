"""The BFCL harness's pure parts: loading entries as aerix tools, and BFCL's AST checker."""
