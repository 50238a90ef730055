import { mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import {
  answer,
  callTools,
  type MessagesRequestBody,
  type MessagesUsage,
  type RecordedRequest,
  type Reply,
  startModelServer,
  thinkingSignature,
} from '@dsh/driver-openai/testing'
import { describe, expect, it } from 'vitest'
import { scratch } from './support/conversation.js'
import { cleanEnv, dshRun, dshStart, history, until } from './support/dsh-process.js'

// `dsh run --provider anthropic` as a user runs it: the built CLI in its own
// process, talking to the local test server's Messages protocol (the only
// fake) over HTTP, with thinking enabled (the server refuses a tool loop
// whose signed thinking does not come back).
const KEY = 'sk-ant-e2e-8b3f0c6d1e'

const t = scratch('dsh-run-anthropic-')
const env = (extra: Record<string, string> = { DSH_API_KEY: KEY }) => cleanEnv(extra)
const dsh = (args: string[], extra?: Record<string, string>) => dshRun(args, env(extra), t.dir)
const origin = () => new URL(t.server!.baseURL).origin

type Block = Exclude<MessagesRequestBody['messages'][number]['content'], string>[number]
const body = (request: RecordedRequest) => request.body as unknown as MessagesRequestBody
const blocks = (content: MessagesRequestBody['messages'][number]['content']): readonly Block[] =>
  typeof content === 'string' ? [{ type: 'text', text: content }] : content
const firstUserText = (request: RecordedRequest) => blocks(body(request).messages[0]?.content ?? []).find((b) => b.type === 'text')?.text
const results = (request: RecordedRequest) =>
  body(request)
    .messages.flatMap((m) => blocks(m.content))
    .filter((b) => b.type === 'tool_result')

/** Every file under `path`, read as text. */
function filesUnder(path: string): string[] {
  return readdirSync(path).flatMap((name) => {
    const full = join(path, name)
    return statSync(full).isDirectory() ? filesUnder(full) : [readFileSync(full, 'latin1')]
  })
}

function defineAgent(name: string, frontmatter: string, instructions: string): void {
  const agents = join(t.dir, '.dsh', 'agents')
  mkdirSync(agents, { recursive: true })
  writeFileSync(join(agents, `${name}.md`), `---\nname: ${name}\n${frontmatter}---\n${instructions}\n`)
}

describe('dsh run --provider anthropic', () => {
  it('delegates to two defined agents (one stopped by its token budget) with thinking and a tool error; the signed thinking goes back', async () => {
    defineAgent(
      'counter',
      'description: Counts wombats.\nprovider: anthropic\nmodel: claude-counter\ntools: [list_agents]\n',
      'Count carefully.',
    )
    defineAgent(
      'spender',
      'description: Spends tokens.\nprovider: anthropic\nmodel: claude-spender\nbudgets:\n  maxTokens: 40\n',
      'Look everywhere.',
    )
    t.server = await startModelServer((request): Reply | undefined => {
      const first = firstUserText(request)
      if (first === 'count the wombats') return answer(['3 ', 'wombats'], undefined, ['Counting.'])
      if (first === 'spend tokens') return callTools([{ id: 'toolu_spend', name: 'list_agents', arguments: '{}' }])
      if (results(request).length === 0) {
        return {
          kind: 'stream',
          reasoning: ['Delegate to both, ', 'then try teleporting.'],
          toolCalls: [
            { id: 'toolu_count', name: 'subagent', arguments: JSON.stringify({ agent: 'counter', prompt: 'count the wombats' }) },
            { id: 'toolu_spend', name: 'subagent', arguments: JSON.stringify({ agent: 'spender', prompt: 'spend tokens' }) },
            { id: 'toolu_teleport', name: 'teleport', arguments: '{"to":"mars"}' },
          ],
        }
      }
      return answer(['Counter says 3 wombats; ', 'the spender ran out of budget.'], undefined, ['Summing up.'])
    })
    const result = await dsh([
      'run',
      'How many wombats are there?',
      '--provider',
      'anthropic',
      '--thinking',
      '2048',
      '--model',
      'claude-parent',
      '--base-url',
      origin(),
      '--root',
      t.root,
    ])
    expect(result.code, result.stdout + result.stderr).toBe(0)
    expect(result.stdout).toContain('Counter says 3 wombats; the spender ran out of budget.')
    const id = /^session (\S+)$/m.exec(result.stdout)![1]!

    // Every request spoke Messages, with thinking on; the parent's second request carried the signed thinking
    // first in its tool step (the server refuses it otherwise), then the three results, the teleport one an error.
    expect(t.server.requests.every((request) => request.protocol === 'messages' && body(request).thinking?.budget_tokens === 2048)).toBe(
      true,
    )
    const parent = t.server.requests.filter((request) => firstUserText(request) === 'How many wombats are there?')
    expect(parent.map((request) => body(request).model)).toEqual(['claude-parent', 'claude-parent'])
    const thought = 'Delegate to both, then try teleporting.'
    const step = body(parent[1]!).messages[1]!
    expect(blocks(step.content).map((b) => b.type)).toEqual(['thinking', 'tool_use', 'tool_use', 'tool_use'])
    expect(blocks(step.content)[0]).toEqual({ type: 'thinking', thinking: thought, signature: thinkingSignature(thought) })
    const answered = results(parent[1]!) as unknown as { tool_use_id: string; is_error?: boolean; content?: { text: string }[] }[]
    expect(answered.map((r) => [r.tool_use_id, r.is_error ?? false])).toEqual([
      ['toolu_count', false],
      ['toolu_spend', false],
      ['toolu_teleport', true],
    ])
    expect(answered[0]!.content![0]!.text).toContain('3 wombats')
    expect(answered[1]!.content![0]!.text).toMatch(/budget/)
    expect(answered[2]!.content![0]!.text).toMatch(/^Error TOOL_UNKNOWN: There is no tool named "teleport"/)

    // The defined agents: their models, instructions and tools; the spender stopped within one step of crossing its budget.
    const counter = t.server.requests.filter((request) => firstUserText(request) === 'count the wombats')
    expect(counter.map((request) => body(request).model)).toEqual(['claude-counter'])
    expect(JSON.stringify(body(counter[0]!).system)).toContain('Count carefully.')
    expect(body(counter[0]!).tools?.map((tool) => tool.name)).toEqual(['list_agents'])
    const spender = t.server.requests.filter((request) => firstUserText(request) === 'spend tokens')
    expect(spender.map((request) => body(request).model)).toEqual(['claude-spender'])

    // The parent's log: the tool step as signed blocks, the error result, usage with cache reads and writes.
    const events = await history(id, t.root, env(), t.dir)
    const messages = events.filter((e) => e.type === 'assistant/message').map((e) => e.data)
    expect(messages[0]!.blocks).toEqual([
      { type: 'reasoning', text: thought, signature: thinkingSignature(thought) },
      expect.objectContaining({ type: 'tool-call', id: 'toolu_count', name: 'subagent' }),
      expect.objectContaining({ type: 'tool-call', id: 'toolu_spend', name: 'subagent' }),
      { type: 'tool-call', id: 'toolu_teleport', name: 'teleport', input: { to: 'mars' }, arguments: '{"to":"mars"}' },
    ])
    expect(events.filter((e) => e.type === 'tool/result').map((e) => e.data.isError ?? false)).toEqual([false, false, true])
    const reported = t.server.reported.filter((report) => parent.includes(t.server!.requests[report.request]!))
    const second = reported[1]!.usage as unknown as MessagesUsage
    expect(second.cache_read_input_tokens).toBeGreaterThan(0)
    expect(events.filter((e) => e.type === 'step/end').at(-1)!.data.usage).toMatchObject({
      cacheRead: second.cache_read_input_tokens,
      cacheWrite: second.cache_creation_input_tokens,
    })

    // The children: the counter completed, the spender ended with reason budget (its descriptor names the provider).
    const agents = await dsh(['agents', id, '--json', '--root', t.root])
    expect(agents.code, agents.stderr).toBe(0)
    const rows = (JSON.parse(agents.stdout) as { rows: { id: string }[] }).rows
    expect(rows).toHaveLength(2)
    const ends = await Promise.all(
      rows.map(async (row) => (await history(row.id, t.root, env(), t.dir)).find((e) => e.type === 'subagent/end')?.data.reason),
    )
    expect(ends.sort()).toEqual(['budget', 'completed'])

    // The key is in no output and in no file of the root.
    expect(t.server.requests.every((request) => JSON.stringify(request.headers).includes(KEY))).toBe(true)
    expect([result.stdout, result.stderr, agents.stdout, ...filesUnder(t.root)].join('\n')).not.toContain(KEY)
  })

  it('SIGKILLed mid-stream after a delegation, --resume (key from ANTHROPIC_API_KEY) closes the turn and sends the signed thinking read back from disk', async () => {
    defineAgent('counter', 'description: Counts wombats.\nmodel: claude-counter\n', 'Count carefully.')
    const lastUserText = (request: RecordedRequest) =>
      blocks(body(request).messages.at(-1)?.content ?? []).findLast((b) => b.type === 'text')?.text
    t.server = await startModelServer((request): Reply | undefined => {
      if (firstUserText(request) === 'count the wombats') return answer(['3 wombats'], undefined, ['Counting.'])
      if (lastUserText(request) === 'Go on') return answer(['...and all 3 wombats lived happily.'], undefined, ['Ending.'])
      if (results(request).length === 0)
        return {
          kind: 'stream',
          reasoning: ['Ask the counter first.'],
          toolCalls: [
            { id: 'toolu_count', name: 'subagent', arguments: JSON.stringify({ agent: 'counter', prompt: 'count the wombats' }) },
          ],
        }
      return { kind: 'stream', reasoning: ['Now the story.'], content: ['Once ', 'upon ', 'a time'], hangAfter: 2 }
    })
    const args = ['--provider', 'anthropic', '--thinking', '1024', '--base-url', origin(), '--root', t.root]
    const running = dshStart(['run', 'Tell a story about the wombats', ...args], env(), t.dir)
    await t.server.hung()
    await until(() => /^session \S+$/m.test(running.output()), 'the session id')
    const id = /^session (\S+)$/m.exec(running.output())![1]!
    // The story's two streamed chunks are durable (another process reads them) before the kill.
    await until(
      async () => (await history(id, t.root, env(), t.dir)).filter((e) => e.type === 'assistant/chunk').length === 2,
      'two durable chunks',
    )
    running.child.kill('SIGKILL')
    expect(await running.exited).toBeNull()

    const resumed = await dsh(['run', '--resume', id, 'Go on', ...args], { ANTHROPIC_API_KEY: KEY })
    expect(resumed.code, resumed.stdout + resumed.stderr).toBe(0)
    expect(resumed.stdout).toContain('...and all 3 wombats lived happily.')
    const events = await history(id, t.root, env(), t.dir)
    expect(events.filter((e) => e.type.startsWith('turn/')).map((e) => [e.type, e.data.turn, e.data.reason ?? null])).toEqual([
      ['turn/start', 1, null],
      ['turn/end', 1, 'interrupted'],
      ['turn/start', 2, null],
      ['turn/end', 2, 'completed'],
    ])
    // The resumed request, built by a new process from the log: the delegation step with its signed thinking
    // (the server refuses a signature it did not issue), the child's result and settlement notice, what streamed before the kill
    // (its thinking, never signed, left out), and the new prompt.
    const thought = 'Ask the counter first.'
    const messages = body(t.server.requests.at(-1)!).messages
    expect(messages.map((m) => [m.role, blocks(m.content).map((b) => b.type)])).toEqual([
      ['user', ['text']],
      ['assistant', ['thinking', 'tool_use']],
      ['user', ['tool_result', 'text']],
      ['assistant', ['text']],
      ['user', ['text']],
    ])
    expect(blocks(messages[1]!.content)[0]).toEqual({ type: 'thinking', thinking: thought, signature: thinkingSignature(thought) })
    expect(blocks(messages[2]!.content)[1]!.text).toMatch(/^\[subagent "counter" \(.+\) settled: completed\]\n3 wombats$/)
    expect(blocks(messages[3]!.content)[0]).toMatchObject({ type: 'text', text: 'Once upon ' })
    expect([resumed.stdout, resumed.stderr, running.output(), ...filesUnder(t.root)].join('\n')).not.toContain(KEY)
  })

  it('refuses an unknown provider, a missing key and options of the other provider before touching the root', async () => {
    const unknown = await dsh(['run', 'hi', '--provider', 'claude', '--json', '--root', t.root])
    expect(unknown.code).toBe(2)
    expect(JSON.parse(unknown.stdout).error).toEqual({
      code: 'CLI_USAGE',
      message: "--provider must be one of openai, anthropic, got 'claude'.",
    })
    const thinking = await dsh(['run', 'hi', '--thinking', '2048', '--json', '--root', t.root])
    expect(JSON.parse(thinking.stdout).error).toMatchObject({ code: 'CLI_USAGE', message: expect.stringContaining('--thinking') })
    const api = await dsh(['run', 'hi', '--provider', 'anthropic', '--api', 'responses', '--json', '--root', t.root])
    expect(JSON.parse(api.stdout).error).toMatchObject({ code: 'CLI_USAGE', message: expect.stringContaining('--api') })
    const keyless = await dsh(['run', 'hi', '--provider', 'anthropic', '--root', t.root], {})
    expect(keyless.code).toBe(1)
    expect(keyless.stderr).toMatch(/DSH_API_KEY or ANTHROPIC_API_KEY.*\(DRIVER_ANTHROPIC_NO_API_KEY\)/)
    expect(() => statSync(t.root)).toThrow()
  })
})
