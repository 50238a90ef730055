#!/usr/bin/env node
// Sums vitest's per-package "Tests  N passed | M failed" lines from a turbo
// log into one closing line, "N passed, M failed", that CI can read.
import { readFileSync } from 'node:fs'

const log = readFileSync(process.argv[2] ?? 0, 'utf8').replace(/\x1b\[[0-9;]*m/g, '')
let passed = 0
let failed = 0
let packages = 0
for (const line of log.split('\n')) {
  const match = /:test:\s+Tests\s+(.*)$/.exec(line)
  if (!match) continue
  packages++
  passed += Number(/(\d+) passed/.exec(match[1])?.[1] ?? 0)
  failed += Number(/(\d+) failed/.exec(match[1])?.[1] ?? 0)
}
console.log(`test packages: ${packages}`)
console.log(`${passed} passed, ${failed} failed`)
