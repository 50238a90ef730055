// cli-startup: a new process running `dsh --help` against a new process
// running `node -e 0`. Target: at most
// 1.5×, i.e. the CLI shell costs at most half a bare Node start — which holds
// only while commands load their modules lazily (no host, SQLite, zstd or
// HTTP server for --help). Whole processes, started the same way.
import { spawnSync } from 'node:child_process'
import { existsSync } from 'node:fs'
import { join } from 'node:path'
import { type BenchDefinition, benchRoot, time } from '../harness.js'

const bin = join(benchRoot, '..', 'apps', 'dsh', 'dist', 'bin.cjs')
/** Processes per sample, so one sample is long enough to time. */
const PROCESSES = 5

function runProcesses(args: readonly string[]): () => Promise<number> {
  return () =>
    time(() => {
      for (let i = 0; i < PROCESSES; i++) {
        const result = spawnSync(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'] })
        if (result.status !== 0) throw new Error(`'node ${args.join(' ')}' exited ${String(result.status)}: ${result.stderr.toString()}`)
      }
    })
}

const definition: BenchDefinition = {
  name: 'cli-startup',
  unit: `ms per ${PROCESSES} processes`,
  target: 1.5,
  compare: 'le',
  repeats: 9,
  setup() {
    if (!existsSync(bin)) throw new Error(`${bin} is missing; build the CLI first (turbo run build --filter=@dsh/cli...).`)
  },
  baseline: { label: 'node -e 0', run: runProcesses(['-e', '0']) },
  subject: { label: 'dsh --help', run: runProcesses([bin, '--help']) },
}

export default definition
