#!/usr/bin/env node
// `pnpm bench [name …]`: runs every suite in dist/suites (or the named ones),
// writes bench/results/<name>.json and regenerates BENCHMARKS.md.
import { readdirSync } from 'node:fs'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { type BenchDefinition, benchRoot, runBench, writeBenchmarksMarkdown } from './harness.js'

const suitesDir = join(benchRoot, 'dist', 'suites')
const available = readdirSync(suitesDir)
  .filter((f) => f.endsWith('.js'))
  .map((f) => f.slice(0, -3))
  .sort()
const wanted = process.argv.slice(2).filter((a) => !a.startsWith('-'))
const unknown = wanted.filter((w) => !available.includes(w))
if (unknown.length > 0) {
  console.error(`Unknown benchmark(s): ${unknown.join(', ')}. Available: ${available.join(', ')}.`)
  process.exit(2)
}
let failed = 0
for (const name of wanted.length > 0 ? wanted : available) {
  const mod = (await import(pathToFileURL(join(suitesDir, `${name}.js`)).href)) as { default: BenchDefinition }
  console.log(`bench ${name} …`)
  const result = await runBench(mod.default)
  console.log(
    `bench ${name}: ${result.baseline.label} ${result.baseline.median} ${result.unit}, ${result.subject.label} ${result.subject.median} ${result.unit}, ratio ${result.ratio} (target ${result.target}) ${result.pass ? 'PASS' : 'FAIL'}`,
  )
  if (!result.pass) failed++
}
writeBenchmarksMarkdown()
console.log(`BENCHMARKS.md updated${failed > 0 ? `; ${failed} benchmark(s) missed their target` : ''}.`)
