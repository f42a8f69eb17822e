// Package profile loads the YAML profiles a runtime composes and keeps a running
// composition in step with its profile file.
//
//   - A Loader reads a profile (a built-in name or a file path) and the bases it
//     extends, patches their rows by id, and returns a Profile: its rows, the files
//     read, and a digest of their content. Every error names the file, and the row and
//     key when there is one.
//   - A Reloader watches the profile's files and, on an edit, loads the profile afresh
//     and composes it into the runtime (which validates it first and restarts only the
//     rows that changed); an invalid edit keeps the last good composition running and is
//     reported in the runtime's Status.
//   - Module wires a runtime composed from a profile into an fx application.
//
// It does not run plugins: the composition is package container's.
package profile
