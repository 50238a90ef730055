import { execFile, spawn } from 'node:child_process'
import { existsSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import {
  answer,
  callTools,
  type ModelServer,
  type RecordedRequest,
  type Reply,
  serverTokenCount,
  startModelServer,
} from '@dsh/driver-openai/testing'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'

// A long `dsh run` as a user runs it: the built CLI in its own process, a
// local Chat Completions server (the only fake) with a small window that
// refuses any request over it, as providers do.
const bin = join(import.meta.dirname, '..', 'dist', 'bin.cjs')
const KEY = 'sk-e2e-7f3a1c9e5b2d'
const WINDOW = 8_000
const STEPS = 200
const SUMMARIZE = /^Summarize the conversation above/
/** What each child answers: about 250 of the server's tokens (words and full stops only). */
const CHUNK = 'the archive holds plain words about rivers and hills. '.repeat(25)
const FINAL = ['All ', 'chunks ', 'read.']

let dir: string
let root: string
let server: ModelServer | undefined

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'dsh-run-compaction-'))
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
    execFile(process.execPath, [bin, ...args], { env: env(), maxBuffer: 64 * 1024 * 1024 }, (error, stdout, stderr) => {
      resolve({ code: error === null ? 0 : Number((error as { code?: number }).code ?? 1), stdout, stderr })
    })
  })
}

interface Event {
  seq: number
  type: string
  data: Record<string, unknown>
}

/** Every event of the session, page by page (newest page first, as `dsh show` pages). */
async function history(id: string): Promise<Event[]> {
  const pages: Event[][] = []
  let before: number | undefined
  for (;;) {
    const args = ['show', id, '--json', '--limit', '500', '--root', root, ...(before === undefined ? [] : ['--before', String(before)])]
    const shown = await dsh(args)
    expect(shown.code, shown.stderr).toBe(0)
    const page = JSON.parse(shown.stdout) as { events: Event[]; nextBefore?: number }
    pages.unshift(page.events)
    if (page.nextBefore === undefined) return pages.flat()
    before = page.nextBefore
  }
}

const lastUser = (request: RecordedRequest) => String(request.body.messages.filter((m) => m.role === 'user').at(-1)?.content ?? '')
const isSummarize = (request: RecordedRequest) => SUMMARIZE.test(lastUser(request))
/** A child's request: its one message is the prompt the parent's call gave it. */
const isChild = (request: RecordedRequest) =>
  request.body.messages.length === 1 && /^read chunk \d+$/.test(String(request.body.messages[0]!.content))
const isTop = (request: RecordedRequest) => !isSummarize(request) && !isChild(request)

/**
 * The scripted model: the top-level agent reads chunk after chunk through a
 * one-shot child each (the child's long answer is the tool's result) until
 * it has called `STEPS` tools, then answers; summaries are short.
 */
function model(): (request: RecordedRequest) => Reply {
  let summaries = 0
  return (request) => {
    if (isSummarize(request)) return answer([`Summary ${++summaries}: the agent read chunks with subagents.`])
    if (isChild(request)) return answer([CHUNK])
    const lastCall = request.body.messages.filter((m) => m.role === 'tool').at(-1)?.tool_call_id
    const step = lastCall === undefined ? 0 : Number(lastCall.slice(1)) + 1
    if (step >= STEPS) return answer(FINAL)
    return callTools([{ id: `c${step}`, name: 'subagent', arguments: JSON.stringify({ prompt: `read chunk ${step}`, mode: 'one-shot' }) }])
  }
}

describe('dsh run --context-window', () => {
  it('runs 200 tool steps past an 8,000-token window: compacts, every request fits, the log keeps every event, --context shows the summary', async () => {
    server = await startModelServer(model(), { contextWindow: WINDOW })
    const result = await dsh([
      'run',
      'Read every chunk, one subagent each.',
      '--root',
      root,
      '--base-url',
      server.baseURL,
      '--context-window',
      String(WINDOW),
      '--max-steps',
      String(STEPS + 1),
    ])
    expect(result.code, result.stdout.slice(-2000) + result.stderr).toBe(0)
    const id = /^session (\S+)$/m.exec(result.stdout)![1]!
    expect(result.stdout).toContain('All chunks read.')

    // Every request the fake received fits its window by its own count; none was refused.
    const sizes = server.requests.map((request) => serverTokenCount(request.body))
    expect(Math.max(...sizes)).toBeLessThanOrEqual(WINDOW)
    const top = server.requests.filter(isTop)
    const summaries = server.requests.filter(isSummarize)
    expect(top).toHaveLength(STEPS + 1)
    expect(server.requests.filter(isChild)).toHaveLength(STEPS)
    expect(server.requests).toHaveLength(2 * STEPS + 1 + summaries.length)

    // The log: every event appended, counted by type against what the fake served; compactions all succeeded.
    const events = await history(id)
    expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i))
    const count = (type: string) => events.filter((e) => e.type === type).length
    const ends = events.filter((e) => e.type === 'compaction/end')
    expect(ends.length).toBeGreaterThanOrEqual(2)
    expect(ends.filter((e) => e.data.error !== undefined)).toEqual([])
    expect({
      'user/message': count('user/message'),
      'turn/start': count('turn/start'),
      'turn/end': count('turn/end'),
      'step/start': count('step/start'),
      'step/end': count('step/end'),
      'tool/call': count('tool/call'),
      'tool/result': count('tool/result'),
      'assistant/chunk': count('assistant/chunk'),
      'assistant/message': count('assistant/message'),
      'compaction/start': count('compaction/start'),
      'compaction/summary': count('compaction/summary'),
      'compaction/end': count('compaction/end'),
    }).toEqual({
      'user/message': 1,
      'turn/start': 1,
      'turn/end': 1,
      'step/start': top.length,
      'step/end': top.length,
      'tool/call': STEPS,
      'tool/result': STEPS,
      'assistant/chunk': FINAL.length,
      'assistant/message': 1,
      'compaction/start': summaries.length,
      'compaction/summary': summaries.length,
      'compaction/end': summaries.length,
    })
    const results = events.filter((e) => e.type === 'tool/result')
    expect(results.map((e) => e.data.callId)).toEqual(Array.from({ length: STEPS }, (_, i) => `c${i}`))
    expect(results.every((e) => e.data.isError === undefined && JSON.stringify(e.data.content).includes('rivers and hills'))).toBe(true)

    // What the model sees now: the newest summary first, then only recent messages; the early ones are shadowed.
    const shown = await dsh(['show', '--context', id, '--root', root])
    expect(shown.code, shown.stderr).toBe(0)
    const lines = shown.stdout.split('\n')
    expect(lines[0]).toMatch(
      new RegExp(`^context of ${id}: \\d+ message\\(s\\) through event ${events.length - 1}, compacted through event \\d+$`),
    )
    expect(shown.stdout).toContain(`Summary ${summaries.length}: the agent read chunks with subagents.`)
    expect(lines[2]).toMatch(/^ {5}0 {2}user {6}\[summary of events 0\.\.\d+ by \S+\] Summary \d+: /)
    expect(shown.stdout).not.toContain('Read every chunk, one subagent each.')
    expect(shown.stdout).not.toContain('"read chunk 0"')
    expect(shown.stdout).toMatch(/ user {6}notice \{"kind":"settled",/)
    expect(shown.stdout).toContain(`call subagent {"prompt":"read chunk ${STEPS - 1}","mode":"one-shot"}`)
    expect(shown.stdout).toContain('All chunks read.')

    const json = await dsh(['show', '--context', id, '--json', '--root', root])
    expect(json.code, json.stderr).toBe(0)
    const view = JSON.parse(json.stdout) as {
      messages: { role: string; seq: number; summary?: { from: number; to: number; seq: number } }[]
      compaction: { seq: number; from: number; to: number } | null
      seq: number
    }
    expect(view.seq).toBe(events.length - 1)
    const lastSummary = events.filter((e) => e.type === 'compaction/summary').at(-1)!
    expect(view.compaction?.seq).toBe(lastSummary.seq)
    expect(view.messages[0]!.role).toBe('user')
    expect(view.messages[0]!.summary?.seq).toBe(lastSummary.seq)
    expect(view.messages.filter((m) => m.summary !== undefined)).toHaveLength(1)
    expect(view.messages.slice(1).every((m) => m.seq >= view.compaction!.to)).toBe(true)

    // Read-only: showing the context appended nothing.
    expect(await history(id)).toHaveLength(events.length)
  })

  it('a run killed while its compaction waits for the summary: the next run --resume closes it (interrupted), compacts again and answers', async () => {
    let summaries = 0
    server = await startModelServer((request) => {
      if (!isSummarize(request)) return answer([`About "${lastUser(request)}": `, 'many words. '.repeat(80)])
      return ++summaries === 1 ? { kind: 'stream', hangAfter: 0 } : answer([`summary ${summaries}`])
    })
    const flags = ['--root', root, '--base-url', server.baseURL]
    const first = await dsh(['run', 'first question', ...flags])
    expect(first.code, first.stderr).toBe(0)
    const id = /^session (\S+)$/m.exec(first.stdout)![1]!
    expect((await dsh(['run', '--resume', id, 'second question', ...flags])).code).toBe(0)

    // The third run's context is over 80% of a 400-token window: it compacts first, and the model holds the summary.
    const killed = spawn(process.execPath, [bin, 'run', '--resume', id, 'third question', ...flags, '--context-window', '400'], {
      env: env(),
      stdio: 'ignore',
    })
    const exited = new Promise((resolve) => killed.on('exit', resolve))
    await server.hung()
    killed.kill('SIGKILL')
    await exited
    const compactions = async () => (await history(id)).filter((e) => e.type.startsWith('compaction/')).map((e) => [e.type, e.data.error])
    expect(await compactions()).toEqual([['compaction/start', undefined]])

    const next = await dsh(['run', '--resume', id, 'fourth question', ...flags, '--context-window', '400'])
    expect(next.code, next.stdout + next.stderr).toBe(0)
    expect(await compactions()).toEqual([
      ['compaction/start', undefined],
      ['compaction/end', 'interrupted'],
      ['compaction/start', undefined],
      ['compaction/summary', undefined],
      ['compaction/end', undefined],
    ])
    const request = server.requests.at(-1)!
    expect(JSON.stringify(request.body.messages)).toContain('summary 2')
    expect(JSON.stringify(request.body.messages)).not.toContain('first question')
    expect(lastUser(request)).toBe('fourth question')
  })

  it('a window or step bound that is not a positive integer is CLI_USAGE (exit 2) before the root is touched', async () => {
    for (const bad of [
      ['--context-window', '0'],
      ['--context-window', '8k'],
      ['--max-steps', '0'],
    ]) {
      const result = await dsh(['run', 'x', '--root', root, '--base-url', 'http://127.0.0.1:9/v1', '--json', ...bad])
      expect(result.code, result.stderr).toBe(2)
      expect(JSON.parse(result.stdout).error.code).toBe('CLI_USAGE')
    }
    expect(existsSync(root)).toBe(false)
  })
})
