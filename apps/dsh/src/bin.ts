#!/usr/bin/env node
import { quietOnBrokenPipe } from './broken-pipe.js'
import { runCli } from './cli.js'

quietOnBrokenPipe(process.stdout, (message) => {
  if (!process.stderr.destroyed) process.stderr.write(message)
})
quietOnBrokenPipe(process.stderr, () => {})

const code = await runCli(process.argv.slice(2))
// A write error reported above keeps its status 1; otherwise the command's own.
if (process.exitCode !== 1) process.exitCode = code
