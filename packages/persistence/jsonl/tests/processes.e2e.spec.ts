import { type ChildProcess, spawn } from 'node:child_process'
import { existsSync, readFileSync, statSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { fileURLToPath } from 'node:url'
import type { SessionId, StoredSessionEvent } from '@dsh/session'
import { createJsonlPersistence, type JsonlCompression } from '@dsh/session-persistence-jsonl'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createCodec } from '../src/codec.js'
import { scanLog } from '../src/log-scan.js'
import { tempDir } from './helpers.js'
// @ts-expect-error -- a plain .mjs module shared with the worker processes
import { deltaOf } from './workers/shared.mjs'

const here = dirname(fileURLToPath(import.meta.url))
const worker = (name: string): string => join(here, 'workers', name)
const delta = deltaOf as (writer: string, seq: number) => string
const plain = (value: unknown): unknown => JSON.parse(JSON.stringify(value)) as unknown

beforeAll(() => {
  // The workers run the built package (they import it by name, resolved to dist/).
  if (!existsSync(join(here, '..', 'dist', 'index.js')))
    throw new Error('Build first: pnpm --filter @dsh/session-persistence-jsonl... build')
})

interface Run {
  readonly child: ChildProcess
  readonly lines: string[]
  /** Resolves when the process has exited and its output is drained. */
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>
  /** Resolves with the first line starting with `prefix`. */
  waitFor(prefix: string): Promise<string>
}

function run(command: string, args: string[]): Run {
  const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'] })
  const lines: string[] = []
  const waiters: Array<{ prefix: string; resolve: (line: string) => void }> = []
  let buffered = ''
  let stderr = ''
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
    buffered += chunk
    for (let at = buffered.indexOf('\n'); at !== -1; at = buffered.indexOf('\n')) {
      const line = buffered.slice(0, at)
      buffered = buffered.slice(at + 1)
      lines.push(line)
      for (const waiter of waiters.splice(0)) {
        if (line.startsWith(waiter.prefix)) waiter.resolve(line)
        else waiters.push(waiter)
      }
    }
  })
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk))
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on('close', (code, signal) => resolve({ code, signal })),
  )
  return {
    child,
    lines,
    exited,
    waitFor(prefix) {
      const seen = lines.find((l) => l.startsWith(prefix))
      if (seen !== undefined) return Promise.resolve(seen)
      return new Promise((resolve, reject) => {
        waiters.push({ prefix, resolve })
        void exited.then(() => reject(new Error(`worker exited before printing '${prefix}': ${lines.join(' | ')} ${stderr}`)))
      })
    },
  }
}

/** Checks a crash-appender log: contiguous seqs and every chunk holding its deterministic delta. Returns the first problem. */
function crashLogProblem(events: readonly StoredSessionEvent[], writer: string): string | undefined {
  for (let i = 0; i < events.length; i++) {
    const event = events[i]!
    if (event.seq !== i) return `event ${i} has seq ${event.seq}`
    if (event.type === 'assistant/chunk') {
      if ((event.data as { delta?: string }).delta !== delta(writer, i)) return `chunk ${i} holds another delta`
    } else if (event.type !== 'turn/start' && event.type !== 'turn/end') {
      return `unexpected event type ${event.type} at ${i}`
    }
  }
  return undefined
}

const KILLS = 200
const LANES = 4

describe('crash: SIGKILL at random points while appending', () => {
  const cleanups: Array<() => void> = []
  afterAll(() => {
    for (const cleanup of cleanups) cleanup()
  })

  it(`after each of ${KILLS} kills every acknowledged batch is there, nothing is corrupt, and load leaves a log a reopen reads identically`, async () => {
    let kills = 0
    let tornTails = 0
    const lane = async (index: number): Promise<void> => {
      const compression: JsonlCompression = index % 2 === 0 ? 'zstd' : 'none'
      const { dir: root, cleanup } = tempDir(`dsh-crash-${compression}-`)
      cleanups.push(cleanup)
      const writer = `w${index}`
      let acked = 0
      for (let round = 0; kills < KILLS; round++) {
        // A few kills per session, then a fresh one: the logs stay small enough to reread every round.
        // Lane 1 starts a fresh session every two rounds (a random kill, then an aimed one).
        const perSession = index === 1 ? 2 : 4
        const id = `crash-${index}-${Math.floor(round / perSession)}` as SessionId
        if (round % perSession === 0) acked = 0
        // On odd rounds lane 1 writes one ~5 MB batch and is killed as soon as the log
        // starts to grow, so kills land inside a write too (not only between appends).
        const aimAtWrite = index === 1 && round % 2 === 1
        const [minBatch, maxBatch, maxAppends] = aimAtWrite ? [50_000, 50_000, 1] : index === 0 ? [1, 1000, 15] : [1, 300, 15]
        const child = run(process.execPath, [
          worker('crash-appender.mjs'),
          root,
          compression,
          id,
          writer,
          String(minBatch),
          String(maxBatch),
          String(maxAppends),
        ])
        const ready = Number((await child.waitFor('ready ')).slice(6))
        expect(ready).toBeGreaterThanOrEqual(acked)
        const file = createJsonlPersistence({ root, compression }).logPath(id)
        if (aimAtWrite) {
          const start = existsSync(file) ? statSync(file).size : 0
          const deadline = Date.now() + 10_000
          while ((existsSync(file) ? statSync(file).size : 0) === start && Date.now() < deadline)
            await new Promise((resolve) => setImmediate(resolve))
        } else {
          await sleep(Math.random() * 60)
        }
        child.child.kill('SIGKILL')
        const { signal } = await child.exited
        expect(signal).toBe('SIGKILL')
        kills++
        expect(child.lines.filter((l) => l.startsWith('error'))).toEqual([])
        for (const line of child.lines) if (line.startsWith('ack ')) acked = Math.max(acked, Number(line.slice(4)))
        if (!existsSync(file)) continue
        // Reopen: no corruption, every acknowledged event present.
        const reader = createJsonlPersistence({ root, compression })
        const observed = await reader.inspect(id)
        expect(observed.events.length).toBeGreaterThanOrEqual(acked)
        expect(crashLogProblem(observed.events, writer)).toBeUndefined()
        const bytes = readFileSync(file)
        if ((await scanLog(bytes, createCodec(compression), file)).committedEnd < bytes.length) tornTails++
        // load repairs (truncating a torn tail, closing the open turn) …
        const loaded = await reader.load(id)
        expect(plain(loaded.events.slice(0, observed.events.length))).toEqual(plain(observed.events))
        expect(crashLogProblem(loaded.events, writer)).toBeUndefined()
        await reader.close()
        // … and a second reopen reads exactly what load returned.
        const again = createJsonlPersistence({ root, compression })
        const reread = await again.inspect(id)
        expect(reread.revision).toBe(loaded.revision)
        expect(plain(reread.events)).toEqual(plain(loaded.events))
        expect((await again.load(id)).repaired).toBe(false)
        await again.close()
        acked = loaded.events.length
      }
    }
    await Promise.all(Array.from({ length: LANES }, (_, i) => lane(i)))
    expect(kills).toBeGreaterThanOrEqual(KILLS)
    console.log(`crash e2e: ${kills} kills; ${tornTails} landed inside a write and left a torn tail for load to truncate`)
  }, 900_000)
})

describe('two processes appending to one session', () => {
  for (const compression of ['zstd', 'none'] as const) {
    it(`one is refused (LOCKED or CONFLICT); the log never interleaves or duplicates seqs (${compression})`, async () => {
      const { dir: root, cleanup } = tempDir()
      try {
        const id = 'contended' as SessionId
        const a = run(process.execPath, [worker('contending-appender.mjs'), root, compression, id, 'A', '40'])
        const b = run(process.execPath, [worker('contending-appender.mjs'), root, compression, id, 'B', '40'])
        await Promise.all([a.exited, b.exited])
        for (const r of [a, b]) {
          expect(r.lines.filter((l) => l.startsWith('error'))).toEqual([])
          expect(r.lines.at(-1)).toBe('done')
        }
        const refusals = [...a.lines, ...b.lines].filter((l) => l.startsWith('refused '))
        expect(refusals.length).toBeGreaterThan(0)
        expect(new Set(refusals.map((l) => l.slice(8)))).toSatisfy((codes: Set<string>) =>
          [...codes].every((c) => c === 'SESSION_PERSISTENCE_LOCKED' || c === 'SESSION_PERSISTENCE_CONFLICT'),
        )
        // Every acknowledged batch is in the log exactly once, where it was acknowledged, and nothing else is.
        const p = createJsonlPersistence({ root, compression })
        const events = (await p.inspect(id)).events
        const owner = new Array<string | undefined>(events.length)
        for (const [tag, r] of [
          ['A', a],
          ['B', b],
        ] as const) {
          for (const l of r.lines.filter((x) => x.startsWith('ack '))) {
            const [first, size] = l.slice(4).split(' ').map(Number) as [number, number]
            for (let seq = first; seq < first + size; seq++) {
              expect(owner[seq]).toBeUndefined()
              owner[seq] = tag
              expect((events[seq]!.data as { delta: string }).delta).toBe(delta(tag, seq))
            }
          }
        }
        expect(owner.every((o) => o !== undefined)).toBe(true)
        expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i))
        expect(events).toHaveLength(80 * 0 + owner.length)
        await p.close()
      } finally {
        cleanup()
      }
    })
  }
})

describe('a failing write', () => {
  it('a first append over the file size limit is SESSION_PERSISTENCE_IO and leaves no session behind (RLIMIT_FSIZE)', async () => {
    const { dir: root, cleanup } = tempDir()
    try {
      const id = 'limited' as SessionId
      // 512 bytes per file at most: the marker, the journal's first records and the lock fit; the first batch does not.
      const r = run('sh', ['-c', `ulimit -f 1 && exec "${process.execPath}" "${worker('size-limited-appender.mjs')}" "${root}" zstd ${id}`])
      await r.exited
      expect(r.lines).toEqual(['failed SESSION_PERSISTENCE_IO', 'done'])
      expect(existsSync(join(root, id))).toBe(false)
    } finally {
      cleanup()
    }
  })

  it('is truncated back and rethrown: acknowledged batches stay, no partial batch remains (RLIMIT_FSIZE)', async () => {
    const { dir: root, cleanup } = tempDir()
    try {
      const id = 'limited' as SessionId
      // ulimit -f counts 512-byte blocks in POSIX sh: 96 KiB of file at most.
      const r = run('sh', [
        '-c',
        `ulimit -f 192 && exec "${process.execPath}" "${worker('size-limited-appender.mjs')}" "${root}" zstd ${id}`,
      ])
      await r.exited
      expect(r.lines.filter((l) => l.startsWith('failed '))).toEqual(['failed SESSION_PERSISTENCE_IO'])
      expect(r.lines.at(-1)).toBe('done')
      const acked = Math.max(...r.lines.filter((l) => l.startsWith('ack ')).map((l) => Number(l.slice(4))))
      expect(acked).toBeGreaterThan(0)
      const p = createJsonlPersistence({ root })
      const file = p.logPath(id)
      const sizeBefore = statSync(file).size
      const observed = await p.inspect(id)
      expect(observed.events).toHaveLength(acked)
      // Nothing to repair: the failed batch was removed by the writer itself.
      const loaded = await p.load(id)
      expect(loaded.repaired).toBe(false)
      expect(statSync(file).size).toBe(sizeBefore)
      await p.close()
    } finally {
      cleanup()
    }
  })
})
