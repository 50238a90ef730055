import { existsSync } from 'node:fs'
import { answer, callTools, type RecordedRequest, startModelServer } from '@dsh/driver-openai/testing'
import { describe, expect, it } from 'vitest'
import { lastUser, scratch } from './support/conversation.js'
import { cleanEnv, dshRun, dshStart, history, until } from './support/dsh-process.js'

// `dsh run` as a user runs it: the built CLI in its own process, talking to a
// local Chat Completions server (the only fake) over HTTP.
const KEY = 'sk-e2e-0d9c7b5a3f1e'

const t = scratch('dsh-run-')
/** The environment of a child: ours without any real key, plus the test key. */
const env = () => cleanEnv({ DSH_API_KEY: KEY })
const dsh = (args: string[]) => dshRun(args, env())
/** Starts `dsh run` and collects its output. */
const start = (args: string[]) => dshStart(['run', ...args], env())

const startedIds = (request: RecordedRequest) =>
  request.body.messages.filter((m) => m.role === 'tool').flatMap((m) => /^Started (\S+)/.exec(String(m.content))?.slice(1) ?? [])

describe('dsh run', () => {
  it('runs a parent that starts a fresh and a forked child, waits, lists them and answers; the root shows it all', async () => {
    t.server = await startModelServer((request) => {
      if (lastUser(request) === 'count the fresh wombats') return answer(['3 fresh ', 'wombats'], { prompt: 4, completion: 3 })
      if (lastUser(request) === 'count the forked wombats') return answer(['5 forked wombats'])
      const step = request.body.messages.filter((m) => m.role === 'tool').length
      if (step === 0)
        return callTools([
          { id: 'c1', name: 'subagent', arguments: '{"prompt":"count the fresh wombats","label":"fresh-one","mode":"continuable"}' },
        ])
      if (step === 1) {
        return callTools([
          {
            id: 'c2',
            name: 'subagent',
            arguments: '{"prompt":"count the forked wombats","label":"forked-one","mode":"continuable","context":"fork"}',
          },
        ])
      }
      if (step === 2) return callTools([{ id: 'c3', name: 'wait_agents', arguments: JSON.stringify({ ids: startedIds(request) }) }])
      if (step === 3) return callTools([{ id: 'c4', name: 'list_agents', arguments: '{}' }])
      return answer(['Eight ', 'wombats ', 'in all.'], { prompt: 20, completion: 6 })
    })
    const result = await dsh([
      'run',
      'How many wombats are there?',
      '--root',
      t.root,
      '--base-url',
      t.server.baseURL,
      '--model',
      'wombat-1',
    ])
    expect(result.code, result.stdout + result.stderr).toBe(0)
    const id = /^session (\S+)$/m.exec(result.stdout)![1]!
    expect(result.stdout).toContain('Eight wombats in all.')
    expect(result.stdout).toMatch(/ {2}\[fresh-one\] answered: 3 fresh wombats/)
    expect(result.stdout).toMatch(/ {2}\[forked-one\] answered: 5 forked wombats/)

    // The catalog: both children, with their labels.
    const agents = await dsh(['agents', id, '--json', '--root', t.root])
    expect(agents.code, agents.stderr).toBe(0)
    const rows = (JSON.parse(agents.stdout) as { rows: { kind: string; label?: string; mode?: string }[] }).rows
    expect(rows.map((row) => [row.kind, row.mode, row.label])).toEqual([
      ['child', 'continuable', 'fresh-one'],
      ['child', 'continuable', 'forked-one'],
    ])

    // The history: the prompt, the streamed chunks, every tool call with its result, the answer with usage.
    const events = await history(id, t.root, env())
    expect(events.filter((e) => e.type === 'assistant/chunk').map((e) => e.data.delta)).toEqual(['Eight ', 'wombats ', 'in all.'])
    expect(events.filter((e) => e.type === 'tool/call').map((e) => e.data.name)).toEqual([
      'subagent',
      'subagent',
      'wait_agents',
      'list_agents',
    ])
    expect(events.filter((e) => e.type === 'tool/result').map((e) => e.data.isError ?? false)).toEqual([false, false, false, false])
    // Usage sums every step of the turn (tests/stats.e2e.spec.ts checks it against the server's reports).
    expect(events.filter((e) => e.type === 'assistant/message').map((e) => e.data)).toMatchObject([
      { turn: 1, text: 'Eight wombats in all.', provider: '127.0.0.1', model: 'wombat-1' },
    ])
    expect(events.at(-1)).toMatchObject({ type: 'turn/end', data: { turn: 1, reason: 'completed' } })

    // And as a person reads it.
    const shown = await dsh(['show', id, '--limit', '1000', '--root', t.root])
    expect(shown.stdout.match(/ assistant\/chunk /g)).toHaveLength(3)
    expect(shown.stdout.match(/ tool\/call /g)).toHaveLength(4)

    // The forked child's context began with what it inherited from its parent.
    const forked = t.server.requests.find((request) => lastUser(request) === 'count the forked wombats')!
    expect(forked.body.messages[0]).toEqual({ role: 'user', content: 'How many wombats are there?' })
    // Children are given the control tools as well.
    expect(forked.body.tools?.map((tool) => tool.function.name)).toEqual(expect.arrayContaining(['subagent', 'wait_agents', 'list_agents']))
    expect(
      t.server.requests.every((request) => request.body.model === 'wombat-1' && request.headers.authorization === `Bearer ${KEY}`),
    ).toBe(true)

    // The key is in no output and no event of any session in the root.
    const sessions = await dsh(['sessions', '--json', '--root', t.root])
    const ids = (JSON.parse(sessions.stdout) as { sessions: { header: { id: string } }[] }).sessions.map((r) => r.header.id)
    expect(ids).toHaveLength(3)
    const everything = [
      result.stdout,
      result.stderr,
      agents.stdout,
      ...(await Promise.all(ids.map(async (each) => JSON.stringify(await history(each, t.root, env()))))),
    ]
    expect(everything.join('\n')).not.toContain(KEY)
  })

  it('after a SIGKILL mid-stream, --resume closes the open turn and continues from what was streamed', async () => {
    t.server = await startModelServer((_request, index) =>
      index === 0 ? { kind: 'stream', content: ['Once ', 'upon ', 'a time'], hangAfter: 2 } : answer(['...there was a wombat.']),
    )
    const running = start(['Tell a story', '--root', t.root, '--base-url', t.server.baseURL])
    await t.server.hung()
    await until(() => /^session \S+$/m.test(running.output()), 'the session id')
    const id = /^session (\S+)$/m.exec(running.output())![1]!
    // The two streamed chunks are durable (another process reads them) before the kill.
    await until(
      async () => (await history(id, t.root, env())).filter((e) => e.type === 'assistant/chunk').length === 2,
      'two durable chunks',
    )
    running.child.kill('SIGKILL')
    expect(await running.exited).toBeNull()

    const resumed = await dsh(['run', '--resume', id, 'Go on', '--root', t.root, '--base-url', t.server.baseURL])
    expect(resumed.code, resumed.stdout + resumed.stderr).toBe(0)
    expect(resumed.stdout).toContain('...there was a wombat.')
    const events = await history(id, t.root, env())
    expect(
      events.map((e) => [e.type, e.data.turn ?? null, e.data.reason ?? null]).filter(([type]) => String(type).startsWith('turn/')),
    ).toEqual([
      ['turn/start', 1, null],
      ['turn/end', 1, 'interrupted'],
      ['turn/start', 2, null],
      ['turn/end', 2, 'completed'],
    ])
    expect(t.server.requests[1]!.body.messages).toEqual([
      { role: 'user', content: 'Tell a story' },
      { role: 'assistant', content: 'Once upon ' },
      { role: 'user', content: 'Go on' },
    ])
  })

  it('Ctrl-C (SIGINT) ends the turn interrupted, keeps what streamed, and exits 130', async () => {
    t.server = await startModelServer(() => ({ kind: 'stream', content: ['partial ', 'answer', ' never'], hangAfter: 2 }))
    const running = start(['Think hard', '--root', t.root, '--base-url', t.server.baseURL])
    await t.server.hung()
    await until(() => running.output().includes('partial answer'), 'the streamed text')
    const id = /^session (\S+)$/m.exec(running.output())![1]!
    running.child.kill('SIGINT')
    expect(await running.exited).toBe(130)
    const events = await history(id, t.root, env())
    expect(events.filter((e) => e.type === 'assistant/chunk').map((e) => e.data.delta)).toEqual(['partial ', 'answer'])
    expect(events.at(-1)).toMatchObject({ type: 'turn/end', data: { turn: 1, reason: 'interrupted' } })
  })

  it("--dialect harness: the harness tools, and a background child's result wakes the agent for a turn that reads it", async () => {
    const notice = (request: RecordedRequest) =>
      request.body.messages.find((m) => m.role === 'user' && String(m.content).startsWith('Background subagent '))?.content
    t.server = await startModelServer((request) => {
      if (request.body.messages.find((m) => m.role === 'user')?.content === 'count the wombats') return answer(['7 wombats'])
      if (notice(request) !== undefined) return answer(['There are ', '7 wombats.'])
      if (request.body.messages.some((m) => m.role === 'tool')) return answer(['Started the counter.'])
      return callTools([{ id: 'c1', name: 'subagent', arguments: '{"description":"wombat counter","prompt":"count the wombats"}' }])
    })
    const result = await dsh(['run', 'How many wombats?', '--dialect', 'harness', '--root', t.root, '--base-url', t.server.baseURL])
    expect(result.code, result.stdout + result.stderr).toBe(0)
    const id = /^session (\S+)$/m.exec(result.stdout)![1]!
    const events = await history(id, t.root, env())
    const started = events.find((e) => e.type === 'tool/result')!.data.content as { text: string; subagentId: string }
    const child = started.subagentId
    expect(started).toEqual({ text: `started subagent ${child}`, kind: 'continuable', subagentId: child })
    const phrased = `Background subagent ${child} has finished; it does nothing more until you send_message it.\nIts last message:\n7 wombats`
    expect(result.stdout).toContain(`[notice] Background subagent ${child} has finished; it does nothing more until you send_message it.`)
    expect(result.stdout).toContain('There are 7 wombats.')

    // The agent was given the harness shapes (no report at the top, no wait_agents or close_agent anywhere).
    const top = t.server.requests.find((request) => request.body.messages[0]?.content === 'How many wombats?')!
    expect(top.body.tools?.map((tool) => tool.function.name)).toEqual(['subagent', 'send_message', 'interrupt_agent', 'list_agents'])
    expect(Object.keys((top.body.tools![0]!.function.parameters as { properties: object }).properties)).toEqual([
      'description',
      'prompt',
      'run_in_background',
    ])
    const forChild = t.server.requests.find((request) => request.body.messages[0]?.content === 'count the wombats')!
    expect(forChild.body.tools?.map((tool) => tool.function.name)).toEqual([
      'subagent',
      'send_message',
      'interrupt_agent',
      'report',
      'list_agents',
    ])
    // The child started fresh: it saw its own prompt only.
    expect(forChild.body.messages).toEqual([{ role: 'user', content: 'count the wombats' }])

    // The settlement reached the agent as the harness phrases it, and woke it for a second turn with no new prompt.
    const woken = t.server.requests.filter((request) => notice(request) !== undefined)
    expect(woken).toHaveLength(1)
    expect(notice(woken[0]!)).toBe(phrased)
    expect(events.filter((e) => e.type === 'user/message').map((e) => e.data.text)).toEqual(['How many wombats?'])
    expect(events.filter((e) => e.type === 'turn/end').map((e) => e.data)).toEqual([
      { turn: 1, reason: 'completed' },
      { turn: 2, reason: 'completed' },
    ])
    expect(events.filter((e) => e.type === 'assistant/message').map((e) => e.data.text)).toEqual([
      'Started the counter.',
      'There are 7 wombats.',
    ])

    // The child is in the catalog with its description as label.
    const agents = await dsh(['agents', id, '--json', '--root', t.root])
    const rows = (JSON.parse(agents.stdout) as { rows: { id: string; kind: string; mode?: string; label?: string }[] }).rows
    expect(rows.map((row) => [row.id, row.mode, row.label])).toEqual([[child, 'continuable', 'wombat counter']])
  })

  it('refuses an unknown --dialect with CLI_USAGE before touching the root', async () => {
    const result = await dsh(['run', 'hi', '--dialect', 'claude', '--json', '--root', t.root])
    expect(result.code).toBe(2)
    expect(JSON.parse(result.stdout).error).toEqual({
      code: 'CLI_USAGE',
      message: "--dialect must be one of dsh, harness, got 'claude'.",
    })
    expect(existsSync(t.root)).toBe(false)
  })

  it('refuses to start without an API key, before touching the root, and says where the key goes', async () => {
    const result = await dshRun(['run', 'hi', '--root', t.root], cleanEnv())
    expect(result.code).toBe(1)
    expect(result.stderr).toMatch(/DSH_API_KEY or OPENAI_API_KEY.*\(DRIVER_OPENAI_NO_API_KEY\)/)
    expect(existsSync(t.root)).toBe(false)
  })
})
