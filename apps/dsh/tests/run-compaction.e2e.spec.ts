import { spawn } from 'node:child_process'
import { existsSync } from 'node:fs'
import { answer, callTools, type RecordedRequest, type Reply, serverTokenCount, startModelServer } from '@dsh/driver-openai/testing'
import { describe, expect, it } from 'vitest'
import { compactionEvents, conversation, isSummarize, lastUser, model, scratch } from './support/conversation.js'
import { cleanEnv, DSH_BIN, dshRun, history } from './support/dsh-process.js'

// A long `dsh run` as a user runs it: the built CLI in its own process, a
// local Chat Completions server (the only fake) with a small window that
// refuses any request over it, as providers do.
const KEY = 'sk-e2e-7f3a1c9e5b2d'
const WINDOW = 8_000
const STEPS = 200
/** What each child answers: about 250 of the server's tokens (words and full stops only). */
const CHUNK = 'the archive holds plain words about rivers and hills. '.repeat(25)
const FINAL = ['All ', 'chunks ', 'read.']

const t = scratch('dsh-run-compaction-')
const env = () => cleanEnv({ DSH_API_KEY: KEY })
const dsh = (args: string[]) => dshRun(args, env())

/** A child's request: its one message is the prompt the parent's call gave it. */
const isChild = (request: RecordedRequest) =>
  request.body.messages.length === 1 && /^read chunk \d+$/.test(String(request.body.messages[0]!.content))
const isTop = (request: RecordedRequest) => !isSummarize(request) && !isChild(request)

/**
 * The scripted model: the top-level agent reads chunk after chunk through a
 * one-shot child each (the child's long answer is the tool's result) until
 * it has called `STEPS` tools, then answers; summaries are short.
 */
function chunkReader(): (request: RecordedRequest) => Reply {
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
    t.server = await startModelServer(chunkReader(), { contextWindow: WINDOW })
    const result = await dsh([
      'run',
      'Read every chunk, one subagent each.',
      '--root',
      t.root,
      '--base-url',
      t.server.baseURL,
      '--context-window',
      String(WINDOW),
      '--max-steps',
      String(STEPS + 1),
    ])
    expect(result.code, result.stdout.slice(-2000) + result.stderr).toBe(0)
    const id = /^session (\S+)$/m.exec(result.stdout)![1]!
    expect(result.stdout).toContain('All chunks read.')

    // Every request the fake received fits its window by its own count; none was refused.
    const sizes = t.server.requests.map((request) => serverTokenCount(request.body))
    expect(Math.max(...sizes)).toBeLessThanOrEqual(WINDOW)
    const top = t.server.requests.filter(isTop)
    const summaries = t.server.requests.filter(isSummarize)
    expect(top).toHaveLength(STEPS + 1)
    expect(t.server.requests.filter(isChild)).toHaveLength(STEPS)
    expect(t.server.requests).toHaveLength(2 * STEPS + 1 + summaries.length)

    // The log: every event appended, counted by type against what the fake served; compactions all succeeded.
    const events = await history(id, t.root, env())
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
    const shown = await dsh(['show', '--context', id, '--root', t.root])
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

    const json = await dsh(['show', '--context', id, '--json', '--root', t.root])
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
    expect(await history(id, t.root, env())).toHaveLength(events.length)
  })

  it('a run killed while its compaction waits for the summary: the next run --resume closes it (interrupted), compacts again and answers', async () => {
    t.server = await startModelServer(model((n) => (n === 1 ? { kind: 'stream', hangAfter: 0 } : answer([`summary ${n}`]))))
    const flags = ['--root', t.root, '--base-url', t.server.baseURL]
    const id = await conversation(t.server, t.root, env(), ['first question', 'second question'])

    // The third run's context is over 80% of a 400-token window: it compacts first, and the model holds the summary.
    const killed = spawn(process.execPath, [DSH_BIN, 'run', '--resume', id, 'third question', ...flags, '--context-window', '400'], {
      env: env(),
      stdio: 'ignore',
    })
    const exited = new Promise((resolve) => killed.on('exit', resolve))
    await t.server.hung()
    killed.kill('SIGKILL')
    await exited
    const compactions = async () => compactionEvents(await history(id, t.root, env()))
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
    const request = t.server.requests.at(-1)!
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
      const result = await dsh(['run', 'x', '--root', t.root, '--base-url', 'http://127.0.0.1:9/v1', '--json', ...bad])
      expect(result.code, result.stderr).toBe(2)
      expect(JSON.parse(result.stdout).error.code).toBe('CLI_USAGE')
    }
    expect(existsSync(t.root)).toBe(false)
  })
})
