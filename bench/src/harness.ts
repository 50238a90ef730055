import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { cpus, totalmem } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

/** One side of a comparison: a labelled measurement repeated `repeats` times. */
export interface BenchSide {
  readonly label: string
  /** Returns one sample in the benchmark's unit (e.g. ms). */
  run(): Promise<number> | number
}

export interface BenchDefinition {
  readonly name: string
  readonly unit: string
  /** What the ratio is compared with. */
  readonly target: number
  /** `le`: pass when ratio <= target (subject/baseline, lower is better); `ge`: pass when ratio >= target. */
  readonly compare: 'le' | 'ge'
  /** How the ratio is formed; default subject / baseline. */
  readonly ratio?: 'subject/baseline' | 'baseline/subject'
  readonly repeats?: number
  setup?(): Promise<void> | void
  teardown?(): Promise<void> | void
  readonly baseline: BenchSide
  readonly subject: BenchSide
  /** Extra figures worth reporting (peak RSS, absolute medians, …). */
  extra?(): Record<string, unknown> | Promise<Record<string, unknown>>
  /**
   * Conditions `pass` requires besides the ratio (a peak RSS bound, …), by
   * name, checked after `extra`; the result reports each one.
   */
  requirements?(): Record<string, boolean> | Promise<Record<string, boolean>>
}

export interface BenchResult {
  readonly name: string
  readonly unit: string
  readonly baseline: { readonly label: string; readonly median: number; readonly samples: number[] }
  readonly subject: { readonly label: string; readonly median: number; readonly samples: number[] }
  readonly ratio: number
  readonly ratioDefinition: string
  readonly target: string
  readonly pass: boolean
  /** The suite's further conditions of `pass`, each met or not. */
  readonly requirements?: Record<string, boolean>
  readonly extra?: Record<string, unknown>
  readonly machine: { readonly node: string; readonly cpus: number; readonly cpuModel: string; readonly memoryGiB: number }
  readonly at: string
}

export const benchRoot = join(dirname(fileURLToPath(import.meta.url)), '..')
export const resultsDir = join(benchRoot, 'results')

export function median(samples: readonly number[]): number {
  const sorted = [...samples].sort((a, b) => a - b)
  const mid = sorted.length >> 1
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2
}

/** Milliseconds taken by `fn`. */
export async function time(fn: () => unknown): Promise<number> {
  const start = process.hrtime.bigint()
  await fn()
  return Number(process.hrtime.bigint() - start) / 1e6
}

/**
 * Runs baseline and subject alternately (so drift hits both), takes medians,
 * forms the ratio and writes `bench/results/<name>.json`.
 */
export async function runBench(def: BenchDefinition, log: (line: string) => void = console.log): Promise<BenchResult> {
  const repeats = def.repeats ?? 7
  await def.setup?.()
  const baseline: number[] = []
  const subject: number[] = []
  try {
    // One untimed warm-up each.
    await def.baseline.run()
    await def.subject.run()
    for (let i = 0; i < repeats; i++) {
      baseline.push(await def.baseline.run())
      subject.push(await def.subject.run())
      log(`  ${def.name}: repeat ${i + 1}/${repeats}`)
    }
  } finally {
    await def.teardown?.()
  }
  const b = median(baseline)
  const s = median(subject)
  const ratioDefinition = def.ratio ?? 'subject/baseline'
  const ratio = ratioDefinition === 'subject/baseline' ? s / b : b / s
  const extra = await def.extra?.()
  const requirements = await def.requirements?.()
  const pass = (def.compare === 'le' ? ratio <= def.target : ratio >= def.target) && Object.values(requirements ?? {}).every((met) => met)
  const result: BenchResult = {
    name: def.name,
    unit: def.unit,
    baseline: { label: def.baseline.label, median: round(b), samples: baseline.map(round) },
    subject: { label: def.subject.label, median: round(s), samples: subject.map(round) },
    ratio: round(ratio),
    ratioDefinition,
    target: `${def.compare === 'le' ? '<=' : '>='} ${def.target}`,
    pass,
    ...(requirements === undefined ? {} : { requirements }),
    ...(extra === undefined ? {} : { extra }),
    machine: {
      node: process.version,
      cpus: cpus().length,
      cpuModel: cpus()[0]?.model ?? 'unknown',
      memoryGiB: Math.round(totalmem() / 2 ** 30),
    },
    at: new Date().toISOString(),
  }
  mkdirSync(resultsDir, { recursive: true })
  writeFileSync(join(resultsDir, `${def.name}.json`), `${JSON.stringify(result, null, 2)}\n`)
  return result
}

/** A result's further conditions, after its ratio target: `; and peakRss (met)`. */
function requirementsCell(requirements: Record<string, boolean> | undefined): string {
  if (requirements === undefined) return ''
  return `; and ${Object.entries(requirements)
    .map(([name, met]) => `${name} (${met ? 'met' : '**not met**'})`)
    .join(', ')}`
}

function round(x: number): number {
  return Math.round(x * 1000) / 1000
}

/** Regenerates BENCHMARKS.md at the repository root from every result file. */
export function writeBenchmarksMarkdown(): string {
  mkdirSync(resultsDir, { recursive: true })
  const results = readdirSync(resultsDir)
    .filter((f) => f.endsWith('.json'))
    .sort()
    .map((f) => JSON.parse(readFileSync(join(resultsDir, f), 'utf8')) as BenchResult)
  const lines = [
    '# Benchmarks',
    '',
    'Generated by `pnpm bench` from `bench/results/*.json`; do not edit by hand.',
    'Each benchmark compares a subject with a baseline measured in the same run',
    '(medians over repeats); the ratio, not the absolute time, is the target.',
    '',
    '| benchmark | baseline (median) | subject (median) | ratio | target | pass | machine |',
    '| --- | --- | --- | --- | --- | --- | --- |',
    ...results.map(
      (r) =>
        `| \`${r.name}\` | ${r.baseline.label}: ${r.baseline.median} ${r.unit} | ${r.subject.label}: ${r.subject.median} ${r.unit} | ${r.ratio} (${r.ratioDefinition}) | ${r.target}${requirementsCell(r.requirements)} | ${r.pass ? 'yes' : '**no**'} | ${r.machine.cpus}× ${r.machine.cpuModel}, Node ${r.machine.node} |`,
    ),
    '',
  ]
  for (const r of results.filter((x) => x.extra !== undefined)) {
    lines.push(`## ${r.name}`, '', '```json', JSON.stringify(r.extra, null, 2), '```', '')
  }
  const text = lines.join('\n')
  writeFileSync(join(benchRoot, '..', 'BENCHMARKS.md'), text)
  return text
}
