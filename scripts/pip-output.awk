# Filters pip's output for scripts/setup.sh: drops blank lines, pip's warnings about
# unused local package indexes ("WARNING: Location ..."), and the build backend's
# warning blocks (setuptools' "BuildBackendWarning: Editable installation." and the
# like: the warning's line and the indented lines under it). Everything else, errors
# included, is kept.
/^[[:space:]]*$/ { next }
/^WARNING: Location/ { skip = 0; next }
/(BuildBackendWarning|SetuptoolsDeprecationWarning|SetuptoolsWarning):/ {
  skip = 1
  indent = match($0, /[^ ]/)
  next
}
skip && match($0, /[^ ]/) >= indent && indent > 1 { next }
skip && /^[[:space:]]*!!/ { next }
{ skip = 0; print }
