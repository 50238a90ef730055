#!/usr/bin/env node
import { guardedStderr, quietOnBrokenPipe } from './broken-pipe.js'
import { runCli } from './cli.js'

quietOnBrokenPipe(process.stdout, (message) => {
  const stderr = guardedStderr()
  if (!stderr.destroyed) stderr.write(message)
})

// No top-level await: the program is built as CommonJS (`dist/bin.cjs`).
void runCli(process.argv.slice(2)).then((code) => {
  // A write error reported above keeps its status 1; otherwise the command's own.
  if (process.exitCode !== 1) process.exitCode = code
})
