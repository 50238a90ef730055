#!/usr/bin/env node
// Runs a command while a CPU hog occupies every core, to prove that no test
// verdict depends on the machine's speed.
//
//   node tooling/scripts/under-load.mjs [--runs N] [--hogs N] [-- command args…]
//
// Defaults: 1 run, one busy process per core (os.availableParallelism()),
// command `.ci/run`. Each run starts fresh hogs (plain `node -e 'for(;;){}'`
// processes), runs the command with its output passed through, kills the
// hogs (SIGKILL, by pid), and records the command's exit code and its last
// "N passed, M failed" line. Ends with one line per run and exits non-zero
// when any run failed. The hogs die with this script (SIGINT/SIGTERM/exit).
import { spawn } from 'node:child_process'
import { availableParallelism } from 'node:os'
import { repoRoot } from './workspace.mjs'

const argv = process.argv.slice(2)
const dash = argv.indexOf('--')
const own = dash < 0 ? argv : argv.slice(0, dash)
const command = dash < 0 ? ['.ci/run'] : argv.slice(dash + 1)
const option = (name, fallback) => {
  const at = own.indexOf(name)
  if (at < 0) return fallback
  const value = Number(own[at + 1])
  if (!Number.isSafeInteger(value) || value < 1) {
    console.error(`under-load: ${name} needs a positive integer.`)
    process.exit(2)
  }
  return value
}
const runs = option('--runs', 1)
const hogCount = option('--hogs', availableParallelism())
if (command.length === 0) {
  console.error('under-load: nothing to run after --.')
  process.exit(2)
}

let hogs = []
function startHogs() {
  hogs = Array.from({ length: hogCount }, () => spawn(process.execPath, ['-e', 'for(;;){}'], { stdio: 'ignore' }))
}
function stopHogs() {
  for (const hog of hogs) if (hog.exitCode === null && hog.signalCode === null) hog.kill('SIGKILL')
  hogs = []
}
process.on('exit', stopHogs)
for (const signal of ['SIGINT', 'SIGTERM']) {
  process.on(signal, () => {
    stopHogs()
    process.exit(130)
  })
}

function runOnce() {
  return new Promise((resolve) => {
    let tail = ''
    // TURBO_FORCE: every run really executes its tasks; a turbo cache hit would
    // replay an earlier run's output and prove nothing about this load.
    const env = { ...process.env, TURBO_FORCE: 'true' }
    const child = spawn(command[0], command.slice(1), { cwd: repoRoot, env, stdio: ['ignore', 'pipe', 'inherit'] })
    child.stdout.on('data', (chunk) => {
      process.stdout.write(chunk)
      tail = (tail + chunk.toString()).slice(-4096)
    })
    child.on('error', (error) => resolve({ code: 127, summary: error.message }))
    child.on('close', (code, signal) => {
      // biome-ignore lint/suspicious/noControlCharactersInRegex: stripping ANSI colour codes (ESC [ … m)
      const lines = tail.replace(/\x1b\[[0-9;]*m/g, '').split('\n')
      const summary =
        lines
          .filter((l) => /^\d+ passed, \d+ failed$/.test(l.trim()))
          .at(-1)
          ?.trim() ?? '(no "N passed, M failed" line)'
      resolve({ code: code ?? (signal === null ? 1 : 128), summary })
    })
  })
}

const results = []
for (let run = 1; run <= runs; run++) {
  console.log(`under-load: run ${run}/${runs}: ${command.join(' ')} with ${hogCount} busy process(es)`)
  const started = Date.now()
  startHogs()
  console.log(`under-load: hog pids ${hogs.map((h) => h.pid).join(' ')}`)
  let result
  try {
    result = await runOnce()
  } finally {
    stopHogs()
  }
  const minutes = ((Date.now() - started) / 60_000).toFixed(2)
  results.push({ run, ...result, minutes })
  console.log(`under-load: run ${run}/${runs} exited ${result.code} after ${minutes} min: ${result.summary}`)
}
console.log('under-load: summary')
for (const r of results) console.log(`  run ${r.run}: exit ${r.code}, ${r.minutes} min, ${r.summary}`)
process.exitCode = results.every((r) => r.code === 0) ? 0 : 1
