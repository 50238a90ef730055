#!/usr/bin/env node
// Sums a CI log into one closing line, "N passed, M failed", that CI can read:
//   - vitest's per-run "Tests  N passed | M failed" lines from turbo's output
//     (each package once per lane);
//   - "dsh-check: <name> passed|failed" lines from the other CI steps (lint,
//     dependency check, consumer test), one each.
// Each unhandled error vitest reports ("Errors  N error") counts as a failure.
// A test file that failed outside its tests (a hook that timed out, an import
// error) fails no test, only the file: a run counts at least as many failures
// as its "Test Files … N failed".
// A vitest run that crashed before its summary line counts as one failure:
// turbo's "<pkg>:test: ... ERR_" / "Failed:" lines name it.
// A failed build or typecheck task counts as one failure each: its tests may
// all pass (tests run from source), and the run must still not read as green.
import { readFileSync } from 'node:fs'

// biome-ignore lint/suspicious/noControlCharactersInRegex: stripping ANSI colour codes (ESC [ … m) from turbo's log
const log = readFileSync(process.argv[2] ?? 0, 'utf8').replace(/\x1b\[[0-9;]*m/g, '')
let passed = 0
let failed = 0
let runs = 0
const checks = []
const summarized = new Set()
const failedTasks = new Set()
const failedSteps = new Set()
const failedFiles = new Map()
for (const line of log.split('\n')) {
  const files = /^(\S+):test:\s+Test Files\s+(.*)$/.exec(line)
  if (files) {
    failedFiles.set(files[1], Number(/(\d+) failed/.exec(files[2])?.[1] ?? 0))
    continue
  }
  const tests = /^(\S+):test:\s+Tests\s+(.*)$/.exec(line)
  if (tests) {
    runs++
    summarized.add(tests[1])
    passed += Number(/(\d+) passed/.exec(tests[2])?.[1] ?? 0)
    failed += Math.max(Number(/(\d+) failed/.exec(tests[2])?.[1] ?? 0), failedFiles.get(tests[1]) ?? 0)
    failedFiles.delete(tests[1])
    continue
  }
  // Unhandled errors fail a vitest run even when every test passed: count each.
  const errors = /^\S+:test:\s+Errors\s+(\d+) errors?/.exec(line)
  if (errors) {
    failed += Number(errors[1])
    continue
  }
  const check = /^dsh-check: (.+) (passed|failed)\s*$/.exec(line)
  if (check) {
    checks.push(`${check[1]} ${check[2]}`)
    if (check[2] === 'passed') passed++
    else failed++
    continue
  }
  const tasks = /^\s*Failed:\s+(.+)$/.exec(line)
  if (tasks) {
    for (const task of tasks[1].split(',').map((name) => name.trim())) {
      if (task.endsWith('#test')) failedTasks.add(task.slice(0, -5))
      else if (task !== '') failedSteps.add(task)
    }
  }
}
for (const task of failedSteps) {
  console.log(`task failed: ${task}`)
  failed++
}
// A failed test task without any summary line crashed (e.g. a config or import error).
for (const name of failedTasks) {
  if (!summarized.has(name)) {
    console.log(`test task crashed before its summary: ${name}`)
    failed++
  }
}
console.log(`vitest runs: ${runs}${checks.length > 0 ? `; checks: ${checks.join(', ')}` : ''}`)
console.log(`${passed} passed, ${failed} failed`)
