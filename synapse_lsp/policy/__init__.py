"""Policy: what may run and what may be read. The permission gate (`gate`), the
remembered rules it consults (`rules`), folder trust (`trust`), the user's and the
folder's hooks (`hooks`) and the secrets deny-list (`secrets`)."""
