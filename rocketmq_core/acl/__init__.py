"""ACL 1.0 ("plain ACL"): signed requests checked against accounts in plain_acl.yml."""
