#!/usr/bin/env bash
# Quick start, command 1: run a broker on the embedded defaults
# (127.0.0.1:7700, SQLite in ./dejaq-data). Extra arguments go to `dejaq broker`.
source "$(dirname "$0")/bootstrap.sh"
exec dejaq broker "$@"
