// Version.swift — the C library's version at run time, for `courier --version`.
import Courier

/// `courier_version()` through the facade: the version of the C core this tool runs with.
let libraryVersion: String = Engine.libraryVersion
