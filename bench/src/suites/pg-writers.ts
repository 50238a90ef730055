// pg-writers: durable appends from 64 writer connections in 8 host processes
// (fixtures/pg-writers.ts), through the PostgreSQL persistence against raw
// autocommitted INSERTs of the same bytes in the same layout, on one server
// with its default durability (fsync on, synchronous commit). Each host
// process opens 8 persistence instances over one pool: an instance writes
// through one writer connection of its own, so 8 instances are 8 writer
// connections. Every writer appends 1 KiB batches to a session of its own.
// Ratio = subject / baseline aggregate appends per second; target >= 0.8.
// Every run is checked against the writers' ledgers (each acknowledged batch
// stored exactly once, byte for byte, nothing else); one more run SIGKILLs a
// host process halfway and checks the same.
// The ratio is taken in fresh host processes: each writer's timed batches are
// its process's first appends after the session's creation, so both sides'
// times include compiling their code. Hosts live longer than that, so the
// suite also measures the steady state, reported beside the ratio (not
// judged): STEADY_PAIRS alternating pairs in which every writer first
// appends WARM_BATCHES untimed batches.
// `DSH_PG_WRITERS_BATCHES` (default 100) sets the timed batches per writer.

import { type LedgerCheck, runWriters, type WritersOptions, type WritersRun } from '../fixtures/pg-writers.js'
import { type BenchPostgres, startBenchPostgres } from '../fixtures/postgres.js'
import { type BenchDefinition, median } from '../harness.js'

const PROCESSES = 8
const CONNECTIONS = 8
const BATCH_BYTES = 1024
const BATCHES = Number(process.env.DSH_PG_WRITERS_BATCHES ?? 100)
const WARM_BATCHES = 300
const STEADY_PAIRS = 5

let db: BenchPostgres | undefined
const runs: { raw: WritersRun[]; dsh: WritersRun[] } = { raw: [], dsh: [] }
let fault: WritersRun | undefined
const steady: { raw: WritersRun[]; dsh: WritersRun[] } = { raw: [], dsh: [] }

const round = (x: number): number => Math.round(x * 1000) / 1000

function clean(check: LedgerCheck): boolean {
  return check.missing === 0 && check.duplicated === 0 && check.altered === 0 && check.unexpected === 0
}

async function checked(options: WritersOptions): Promise<WritersRun> {
  const result = await runWriters(options)
  if (!clean(result.check) || result.check.stored !== result.check.acknowledged)
    throw new Error(`pg-writers: the ${options.mode} store does not match the ledgers: ${JSON.stringify(result.check)}`)
  return result
}

async function measured(mode: 'dsh' | 'raw'): Promise<number> {
  const result = await checked(options(mode))
  runs[mode].push(result)
  return result.appendsPerSecond
}

function options(mode: 'dsh' | 'raw', warmBatches = 0): WritersOptions {
  return {
    cluster: db!.cluster,
    mode,
    processes: PROCESSES,
    connections: CONNECTIONS,
    warmBatches,
    batches: BATCHES,
    batchBytes: BATCH_BYTES,
  }
}

const definition: BenchDefinition = {
  name: 'pg-writers',
  unit: 'appends/s',
  target: 0.8,
  compare: 'ge',
  ratio: 'subject/baseline',
  repeats: 5,
  async setup() {
    db = await startBenchPostgres({ max: 1, settings: { max_connections: '300' } })
    fault = await runWriters({ ...options('dsh'), kill: { process: 0, afterAcked: (CONNECTIONS * BATCHES) / 2 } })
    if (!clean(fault.check) || !fault.killed)
      throw new Error(`pg-writers: the SIGKILL run lost or altered batches: ${JSON.stringify(fault.check)}`)
    for (let i = 0; i < STEADY_PAIRS; i++) {
      steady.raw.push(await checked(options('raw', WARM_BATCHES)))
      steady.dsh.push(await checked(options('dsh', WARM_BATCHES)))
    }
  },
  async teardown() {
    await db?.close()
  },
  baseline: {
    label: `raw INSERT autocommit, ${PROCESSES} processes × ${CONNECTIONS} connections`,
    run: () => measured('raw'),
  },
  subject: {
    label: `PostgreSQL persistence append, ${PROCESSES} processes × ${CONNECTIONS} writer connections`,
    run: () => measured('dsh'),
  },
  extra() {
    const p = (rs: WritersRun[], k: 'p50' | 'p99') => round(median(rs.slice(1).map((r) => r.latencyMs[k])))
    const cpu = (timed: WritersRun[]) => {
      const server = timed.map((r) => r.cpuMsPerAppend.server).filter((ms) => ms !== undefined)
      return {
        hosts: round(median(timed.map((r) => r.cpuMsPerAppend.hosts))),
        server: server.length === timed.length ? round(median(server)) : null,
      }
    }
    const rate = (rs: WritersRun[]) => median(rs.map((r) => r.appendsPerSecond))
    return {
      processes: PROCESSES,
      connectionsPerProcess: CONNECTIONS,
      batchBytes: BATCH_BYTES,
      timedBatchesPerWriter: BATCHES,
      appendLatencyMs: {
        raw: { p50: p(runs.raw, 'p50'), p99: p(runs.raw, 'p99') },
        dsh: { p50: p(runs.dsh, 'p50'), p99: p(runs.dsh, 'p99') },
        note: 'medians over the timed runs of each run’s p50 and p99 (the warm-up run excluded)',
      },
      cpuMsPerAppend: {
        raw: cpu(runs.raw.slice(1)),
        dsh: cpu(runs.dsh.slice(1)),
        note: 'medians over the timed runs (the warm-up run excluded) of CPU per timed append: the 8 host processes’ own, and the server’s (postmaster and backends)',
      },
      ledgerChecks: { raw: runs.raw.map((r) => r.check), dsh: runs.dsh.map((r) => r.check) },
      steadyState: {
        warmBatchesPerWriter: WARM_BATCHES,
        pairs: STEADY_PAIRS,
        raw: round(rate(steady.raw)),
        dsh: round(rate(steady.dsh)),
        ratio: round(rate(steady.dsh) / rate(steady.raw)),
        pairRatios: steady.dsh.map((r, i) => round(r.appendsPerSecond / steady.raw[i]!.appendsPerSecond)),
        cpuMsPerAppend: { raw: cpu(steady.raw), dsh: cpu(steady.dsh) },
        note: 'not judged: every writer appends the warm batches untimed first, so the timed batches run in host processes that have been appending for a while; every run passed the ledger check',
      },
      sigkill: { process: 0, afterAcked: (CONNECTIONS * BATCHES) / 2, check: fault?.check },
      server: 'fsync on, synchronous_commit on (the defaults)',
    }
  },
}

export default definition
