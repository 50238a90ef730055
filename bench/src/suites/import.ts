// import: `importV0` of one deepseek-harness v0 session whose decompressed
// JSONL is 100 MiB — harness-shaped events (turns, steps, request headers,
// streamed text deltas packed into `text-chunks` rows as the harness writes
// them by default, assistant messages with content blocks, tool calls and
// code-like tool results), one zstd frame per turn — into a fresh JSONL dsh
// root, against the least any reader of that file does: read it, decompress
// every frame and `JSON.parse` every line, and expand the packed
// rows into their events. The subject does everything an import does: reads
// and checks every frame and row, converts every event, compares with the
// (empty) target and appends durably (zstd frames, CRC trailers, fsync); a
// text row of step 0 is appended as one run of events given as columns
// (`StoredEventRun`), so its events are never made one by one — which is why
// the ratio against decompress + parse alone, rows left packed, is reported
// too, under `extra.parseOnly`. Ratio = subject /
// baseline; target <= 2.
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { importV0, packChunkRuns, type V0Event, writeV0Log } from '@dsh/session-import-v0'
import { createJsonlPersistence } from '@dsh/session-persistence-jsonl'
import { prng, textSource } from '@dsh/test-kit'
import { decompress } from 'zstd-napi'
import { type BenchDefinition, median, time } from '../harness.js'

const PLAINTEXT_BYTES = 100 * 1024 * 1024
const ID = 'bench-import'

/**
 * Turns of a harness session, one array per turn (= one append batch = one
 * frame). Stops once the lines the harness writes for them (delta runs packed
 * into rows) add up to `plaintextBytes`.
 */
function harnessTurns(plaintextBytes: number, seed = 16): V0Event[][] {
  const rand = prng(seed)
  const { word, words, codeLine } = textSource(rand)
  const system = Array.from({ length: 120 }, () => words(12)).join('\n')
  const tools = ['read_file', 'bash', 'grep', 'edit'].map((name) => ({
    name,
    description: words(20),
    parameters: { type: 'object', properties: { path: { type: 'string' } } },
  }))
  const turns: V0Event[][] = []
  let seq = 0
  let clock = 1_760_000_000_000
  let bytes = 0
  const add = (into: V0Event[], type: string, data: unknown, extras: Partial<V0Event> = {}): number => {
    clock += 1 + Math.floor(rand() * 40)
    const event = { type, seq: seq++, time: clock, data, ...extras }
    into.push(event)
    return event.seq
  }
  for (let turn = 1; bytes < plaintextBytes; turn++) {
    const events: V0Event[] = []
    add(events, 'turn/start', { turn })
    add(
      events,
      'user/message',
      { id: `u${turn}`, role: 'user', content: [{ type: 'text', text: words(8 + Math.floor(rand() * 40)) }], source: { kind: 'user' } },
      { surfaceOp: 'append' },
    )
    add(events, 'step/start', { turn, step: 0 })
    if (turn % 25 === 1)
      add(
        events,
        'request/header',
        { header: { config: { provider: 'deepseek', model: 'deepseek-chat' }, system, tools }, reason: turn === 1 ? 'initial' : 'change' },
        { ignorable: true },
      )
    const chunkSeqs: number[] = []
    chunkSeqs.push(add(events, 'assistant/chunk', { turn, step: 0, chunk: { type: 'block-start', index: 0, blockType: 'text' } }))
    const chunks = 40 + Math.floor(rand() * 360)
    let text = ''
    for (let i = 0; i < chunks; i++) {
      const delta = (i === 0 ? '' : ' ') + words(1 + Math.floor(rand() * 4))
      text += delta
      chunkSeqs.push(add(events, 'assistant/chunk', { turn, step: 0, chunk: { type: 'text-delta', index: 0, text: delta } }))
    }
    chunkSeqs.push(add(events, 'assistant/chunk', { turn, step: 0, chunk: { type: 'finish', reason: { kind: 'tool-calls' } } }))
    const calls = 1 + Math.floor(rand() * 2)
    const content: unknown[] = [{ type: 'text', text }]
    for (let c = 0; c < calls; c++)
      content.push({ type: 'tool-call', id: `call_${turn}_${c}`, name: 'read_file', arguments: `{"path":"/work/src/${word()}.ts"}` })
    add(
      events,
      'assistant/message',
      {
        turn,
        step: 0,
        message: { id: `a${turn}`, role: 'assistant', content, source: { kind: 'model', provider: 'deepseek', model: 'deepseek-chat' } },
        usage: { inputTokens: 1000 + Math.floor(rand() * 50_000), outputTokens: chunks * 3 },
      },
      { sourceEventSeqs: chunkSeqs, surfaceOp: 'append' },
    )
    for (let c = 0; c < calls; c++) {
      const callId = `call_${turn}_${c}`
      add(events, 'tool/call', { turn, step: 0, callId, name: 'read_file', arguments: `{"path":"/work/src/${word()}.ts"}` })
      const result = Array.from({ length: 20 + Math.floor(rand() * 120) }, codeLine).join('\n')
      add(
        events,
        'tool/result',
        {
          turn,
          step: 0,
          message: {
            id: `r${turn}_${c}`,
            role: 'user',
            content: [{ type: 'tool-result', toolCallId: callId, content: [{ type: 'text', text: result }], isError: false }],
            source: { kind: 'tool', callId },
          },
        },
        { surfaceOp: 'append' },
      )
    }
    add(events, 'step/end', { turn, step: 0 })
    add(events, 'turn/end', { turn, reason: { kind: 'completed' } })
    for (const record of packChunkRuns(events)) bytes += Buffer.byteLength(JSON.stringify(record)) + 1
    turns.push(events)
  }
  return turns
}

/** The least a reader does with a `text-chunks` row: one event per member (no validation). */
function expandTexts(
  row: { seq0: number; time0: number; data: { turn: number; step: number; index: number; dt: number[]; texts: string[] } },
  into: unknown[],
): void {
  let time = row.time0
  const { turn, step, index, dt, texts } = row.data
  for (let k = 0; k < texts.length; k++) {
    if (k > 0) time += dt[k - 1]!
    into.push({
      type: 'assistant/chunk',
      seq: row.seq0 + k,
      time,
      data: { turn, step, chunk: { type: 'text-delta', index, text: texts[k] } },
    })
  }
}

/**
 * CPU time (user + system, ms) of each sample: less sensitive than wall time
 * to other work on a shared machine. `process` counts every thread (GC
 * helpers, the libuv pool's fsyncs); `main` only the main thread, which is
 * what bounds the wall time on an otherwise idle machine with a core to
 * spare (Linux only: read from /proc).
 */
const cpu = { baseline: [] as number[], subject: [] as number[] }
const mainCpu = { baseline: [] as number[], subject: [] as number[] }
function mainThreadCpuMs(): number | undefined {
  try {
    const fields = readFileSync(`/proc/self/task/${process.pid}/stat`, 'utf8').split(') ')[1]!.split(' ')
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100
  } catch {
    return undefined
  }
}
async function timed(side: 'baseline' | 'subject', run: () => unknown): Promise<number> {
  const start = process.cpuUsage()
  const mainStart = mainThreadCpuMs()
  const ms = await time(run)
  const used = process.cpuUsage(start)
  const mainEnd = mainThreadCpuMs()
  cpu[side].push((used.user + used.system) / 1000)
  if (mainStart !== undefined && mainEnd !== undefined) mainCpu[side].push(mainEnd - mainStart)
  return ms
}

let from = ''
let file = ''
let events = 0
let plaintextBytes = 0
let fileMiB = 0
let lastImport: { appends: number; storedMiB: number } | undefined
/** Decompress + JSON.parse of every line, rows left as they are: ms per sample. */
const parseOnly: number[] = []
const subjectMs: number[] = []

const definition: BenchDefinition = {
  name: 'import',
  unit: 'ms per import of a 100 MiB-plaintext v0 session',
  target: 2,
  compare: 'le',
  repeats: 5,
  async setup() {
    from = mkdtempSync(join(tmpdir(), 'dsh-bench-import-v0-'))
    const turns = harnessTurns(PLAINTEXT_BYTES)
    events = turns.reduce((n, t) => n + t.length, 0)
    file = await writeV0Log(from, { id: ID, createdAt: 1_760_000_000_000, cwd: '/work', delegationDepth: 0 }, turns)
  },
  teardown() {
    fileMiB = +(statSync(file).size / 2 ** 20).toFixed(2)
    rmSync(from, { recursive: true, force: true })
  },
  baseline: {
    label: 'read + decompress every frame + JSON.parse every line + expand packed rows into their events',
    async run() {
      const ms = await timed('baseline', () => {
        const text = decompress(readFileSync(file)).toString('utf8')
        plaintextBytes = text.length
        const parsed: unknown[] = []
        for (let start = 0, end = text.indexOf('\n'); end !== -1; start = end + 1, end = text.indexOf('\n', start)) {
          const record = JSON.parse(text.slice(start, end))
          if (record.type === 'text-chunks') expandTexts(record, parsed)
          else parsed.push(record)
        }
        if (parsed.length !== events + 1) throw new Error(`the baseline read ${parsed.length - 1} events, expected ${events}`)
      })
      // Decompress and parse alone (rows left packed), reported under `extra`: an import
      // keeps a text row as one run of events, so it need not make them either.
      parseOnly.push(
        await time(() => {
          const text = decompress(readFileSync(file)).toString('utf8')
          let lines = 0
          for (let start = 0, end = text.indexOf('\n'); end !== -1; start = end + 1, end = text.indexOf('\n', start)) {
            JSON.parse(text.slice(start, end))
            lines++
          }
          if (lines === 0) throw new Error('the parse-only baseline read no line')
        }),
      )
      return ms
    },
  },
  subject: {
    label: 'importV0 into a fresh JSONL root (read, check, expand, convert, durable appends)',
    async run() {
      const root = mkdtempSync(join(tmpdir(), 'dsh-bench-import-dsh-'))
      const persistence = createJsonlPersistence({ root })
      try {
        const ms = await timed('subject', async () => {
          const report = await importV0({ from, persistence })
          const result = report.sessions[0]
          if (report.imported !== 1 || result?.events !== events)
            throw new Error(`import did not import the session: ${JSON.stringify(report)}`)
          lastImport = { appends: report.appends, storedMiB: 0 }
        })
        lastImport = { appends: lastImport?.appends ?? 0, storedMiB: +(statSync(persistence.logPath(ID)).size / 2 ** 20).toFixed(2) }
        subjectMs.push(ms)
        return ms
      } finally {
        await persistence.close()
        rmSync(root, { recursive: true, force: true })
      }
    },
  },
  extra() {
    const b = median(cpu.baseline)
    const s = median(cpu.subject)
    const mb = mainCpu.baseline.length > 0 ? median(mainCpu.baseline) : undefined
    const ms = mainCpu.subject.length > 0 ? median(mainCpu.subject) : undefined
    return {
      cpuMs: {
        baseline: Math.round(b),
        subject: Math.round(s),
        ratio: +(s / b).toFixed(3),
        note: 'medians of user+system CPU time of the whole process (all threads), warm-up included',
      },
      ...(mb === undefined || ms === undefined
        ? {}
        : {
            mainThreadCpuMs: {
              baseline: Math.round(mb),
              subject: Math.round(ms),
              ratio: +(ms / mb).toFixed(3),
              note: 'medians of the main thread alone (10 ms ticks): what bounds the wall time when a second core is free',
            },
          }),
      parseOnly: {
        ms: +median(parseOnly.slice(1)).toFixed(1),
        ratio: +(median(subjectMs.slice(1)) / median(parseOnly.slice(1))).toFixed(3),
        note: 'subject / (decompress + JSON.parse of every line, packed rows left unexpanded; measured after each baseline sample), warm-ups excluded',
      },
      events,
      decompressedMiB: +(plaintextBytes / 2 ** 20).toFixed(1),
      fileMiB,
      ...lastImport,
    }
  },
}

export default definition
