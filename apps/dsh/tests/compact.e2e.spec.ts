import { type ChildProcess, execFile, spawn } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { answer, type ModelServer, type RecordedRequest, type Reply, startModelServer } from '@dsh/driver-openai/testing'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'

// `dsh compact` as a user runs it: the built CLI in its own process, a local
// Chat Completions server (the only fake) writing the summaries.
const bin = join(import.meta.dirname, '..', 'dist', 'bin.cjs')
const worker = join(import.meta.dirname, 'support', 'compact-worker.mjs')
const KEY = 'sk-e2e-5c1d9e7a2b4f'
const SUMMARIZE = /^Summarize the conversation above/

let dir: string
let root: string
let server: ModelServer | undefined

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'dsh-compact-'))
  root = join(dir, 'root')
})
afterEach(async () => {
  await server?.close()
  server = undefined
  rmSync(dir, { recursive: true, force: true })
})

function env(): NodeJS.ProcessEnv {
  const { DSH_API_KEY: _a, OPENAI_API_KEY: _b, DSH_BASE_URL: _c, OPENAI_BASE_URL: _d, DSH_MODEL: _e, ...rest } = process.env
  return { ...rest, DSH_API_KEY: KEY }
}

function dsh(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [bin, ...args], { env: env(), maxBuffer: 16 * 1024 * 1024 }, (error, stdout, stderr) => {
      resolve({ code: error === null ? 0 : Number((error as { code?: number }).code ?? 1), stdout, stderr })
    })
  })
}

function spawned(args: string[]): { child: ChildProcess; output: () => string; exited: Promise<unknown> } {
  const child = spawn(process.execPath, args, { env: env(), stdio: ['ignore', 'pipe', 'pipe'] })
  let output = ''
  child.stdout!.on('data', (part: Buffer) => (output += part.toString()))
  child.stderr!.on('data', (part: Buffer) => (output += part.toString()))
  return { child, output: () => output, exited: new Promise((resolve) => child.on('exit', resolve)) }
}

/** Resolves when `child` has written `line` (an event the child reports, not a timer). */
function printed(p: ReturnType<typeof spawned>, line: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const check = (): void => {
      if (p.output().split('\n').includes(line)) resolve()
    }
    p.child.stdout!.on('data', check)
    p.child.on('exit', () => reject(new Error(`exited before '${line}': ${p.output()}`)))
    check()
  })
}

interface Event {
  seq: number
  type: string
  data: Record<string, unknown>
}

async function history(id: string): Promise<Event[]> {
  const shown = await dsh(['show', id, '--json', '--limit', '1000', '--root', root])
  expect(shown.code, shown.stderr).toBe(0)
  return (JSON.parse(shown.stdout) as { events: Event[] }).events
}

const lastUser = (request: RecordedRequest) => request.body.messages.filter((m) => m.role === 'user').at(-1)?.content ?? ''
const isSummarize = (request: RecordedRequest) => SUMMARIZE.test(String(lastUser(request)))

/** A model that answers each prompt with a long text, and summaries with `summary()` (a reply, or a hold). */
function model(summary: (n: number) => Reply): (request: RecordedRequest) => Reply {
  let summaries = 0
  return (request) => (isSummarize(request) ? summary(++summaries) : answer([`About "${lastUser(request)}": `, 'many words. '.repeat(80)]))
}

/** Three turns of `dsh run` in one session; its id. */
async function conversation(): Promise<string> {
  const first = await dsh(['run', 'first question', '--root', root, '--base-url', server!.baseURL])
  expect(first.code, first.stdout + first.stderr).toBe(0)
  const id = /^session (\S+)$/m.exec(first.stdout)![1]!
  for (const prompt of ['second question', 'third question']) {
    const next = await dsh(['run', '--resume', id, prompt, '--root', root, '--base-url', server!.baseURL])
    expect(next.code, next.stdout + next.stderr).toBe(0)
  }
  return id
}

const compactionEvents = (events: readonly Event[]) =>
  events.filter((e) => e.type.startsWith('compaction/')).map((e) => [e.type, e.data.error])
const summarizeRequests = () => server!.requests.filter(isSummarize)
/** The user prompts a summarize request carried (the messages it shadowed). */
const shadowedPrompts = (request: RecordedRequest) =>
  request.body.messages
    .slice(0, -1)
    .filter((m) => m.role === 'user')
    .map((m) => m.content)

describe('dsh compact', () => {
  it('summarizes the older context; the log keeps every event; the next turn is built from the compacted context', async () => {
    server = await startModelServer(model(() => answer(['The user asked ', 'two questions.'])))
    const id = await conversation()
    const before = await history(id)
    const compacted = await dsh(['compact', id, '--keep', '2', '--root', root, '--base-url', server.baseURL])
    expect(compacted.code, compacted.stdout + compacted.stderr).toBe(0)
    expect(compacted.stdout).toMatch(new RegExp(`^compacted ${id}: 4 message\\(s\\)`))
    expect(compacted.stderr.match(/dsh: compaction \w+/g)).toEqual([
      'dsh: compaction started',
      'dsh: compaction summarized',
      'dsh: compaction ended',
    ])
    expect(shadowedPrompts(summarizeRequests()[0]!)).toEqual(['first question', 'second question'])

    const after = await history(id)
    expect(after.slice(0, before.length)).toEqual(before)
    expect(compactionEvents(after)).toEqual([
      ['compaction/start', undefined],
      ['compaction/summary', undefined],
      ['compaction/end', undefined],
    ])

    const next = await dsh(['run', '--resume', id, 'fourth question', '--root', root, '--base-url', server.baseURL])
    expect(next.code, next.stdout + next.stderr).toBe(0)
    const request = server.requests.at(-1)!
    expect(request.body.messages[0]!.content).toContain('The user asked two questions.')
    const sent = JSON.stringify(request.body.messages)
    expect(sent).not.toContain('first question')
    expect(sent).toContain('third question')
  })

  it('a summarizer failure (the model server refuses the request) exits 1 typed; the log records it and the context is unchanged', async () => {
    server = await startModelServer(model(() => ({ kind: 'error', status: 400, message: 'context too long' })))
    const id = await conversation()
    const failed = await dsh(['compact', id, '--root', root, '--base-url', server.baseURL, '--keep', '0'])
    expect(failed.code).toBe(1)
    expect(failed.stderr).toContain('COMPACTION_SUMMARIZER_FAILED')
    expect(compactionEvents(await history(id))).toEqual([
      ['compaction/start', undefined],
      ['compaction/end', expect.stringContaining('context too long')],
    ])
  })

  it('is refused with SESSION_PERSISTENCE_LOCKED while another process writes the session', async () => {
    server = await startModelServer(model(() => ({ kind: 'stream', hangAfter: 0 })))
    const id = await conversation()
    // A second process holds the session's writer lock: it is compacting, its summary held by the model.
    const holder = spawned([bin, 'compact', id, '--root', root, '--base-url', server.baseURL])
    await server.hung()
    const refused = await dsh(['compact', id, '--root', root, '--base-url', server.baseURL])
    expect(refused.code).toBe(1)
    expect(refused.stderr).toContain('SESSION_PERSISTENCE_LOCKED')
    holder.child.kill('SIGKILL')
    await holder.exited
  })

  for (const stage of ['started', 'summarized'] as const) {
    it(`a process SIGKILLed after compaction/${stage === 'started' ? 'start' : 'summary'} leaves no half state: after a restart the context is the one before, and the next compaction succeeds`, async () => {
      // The first summary is held (the model never answers it) or answered, then the process stops at `stage`.
      server = await startModelServer(
        model((n) => (n === 1 && stage === 'started' ? { kind: 'stream', hangAfter: 0 } : answer([`summary ${n}`]))),
      )
      const id = await conversation()
      // After the start the model holds the summary (the pending request); after the summary the worker holds.
      const running = spawned([worker, root, id, server.baseURL, stage === 'started' ? '-' : stage])
      await printed(running, stage)
      if (stage === 'started') await server.hung()
      running.child.kill('SIGKILL')
      await running.exited
      const killed = compactionEvents(await history(id))
      expect(killed).toEqual(
        stage === 'started'
          ? [['compaction/start', undefined]]
          : [
              ['compaction/start', undefined],
              ['compaction/summary', undefined],
            ],
      )

      // The restart: loading the session closes the compaction; the summary (if any) was never applied,
      // so the next compaction is asked about the original messages, and it succeeds.
      const again = await dsh(['compact', id, '--keep', '2', '--root', root, '--base-url', server.baseURL])
      expect(again.code, again.stdout + again.stderr).toBe(0)
      const retry = summarizeRequests().at(-1)!
      expect(shadowedPrompts(retry)).toEqual(['first question', 'second question'])
      expect(compactionEvents(await history(id))).toEqual([
        ...killed,
        ['compaction/end', 'interrupted'],
        ['compaction/start', undefined],
        ['compaction/summary', undefined],
        ['compaction/end', undefined],
      ])
      const next = await dsh(['run', '--resume', id, 'fourth question', '--root', root, '--base-url', server.baseURL])
      expect(next.code, next.stdout + next.stderr).toBe(0)
      expect(server.requests.at(-1)!.body.messages[0]!.content).toContain(`summary ${summarizeRequests().length}`)
    })
  }
})
