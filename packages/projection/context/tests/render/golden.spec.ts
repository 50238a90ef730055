import { existsSync, readFileSync, writeFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import { type Rendered, renderAnthropic, renderChat, renderResponses } from '../../src/index.js'
import { attachments, fixtureContext } from './fixture.js'

/**
 * Golden files: the fixture context rendered for each protocol, stored as
 * JSON. A render is compared with its stored file; `DSH_UPDATE_GOLDEN=1`
 * rewrites the files instead (then review the diff).
 */
const UPDATE = process.env.DSH_UPDATE_GOLDEN === '1'

function golden(name: string, rendered: Rendered<unknown>): void {
  const file = new URL(`../fixtures/render/${name}.json`, import.meta.url)
  const text = `${JSON.stringify(rendered, null, 2)}\n`
  if (UPDATE) writeFileSync(file, text)
  if (!existsSync(file)) throw new Error(`${file.pathname} is missing: run with DSH_UPDATE_GOLDEN=1 to write it`)
  expect(JSON.parse(text)).toEqual(JSON.parse(readFileSync(file, 'utf8')))
}

describe('renderers against golden files', () => {
  it('chat: summary as a user message, data URLs, calls with JSON-string arguments, error and synthetic results marked, reasoning counted and left out', () => {
    const rendered = renderChat(fixtureContext, { attachments })
    golden('chat', rendered)
    const { messages } = rendered.body
    expect(messages.map((m) => m.role)).toEqual(['system', 'user', 'user', 'assistant', 'tool', 'tool', 'tool', 'user', 'assistant'])
    expect(messages[1]).toEqual({ role: 'user', content: expect.stringContaining('Summary of the conversation') })
    expect(messages[3]).toMatchObject({
      tool_calls: [
        { id: 'c1', function: { arguments: '{"path":"a.txt"}' } },
        { id: 'c2', function: { arguments: '{"cmd": "false"}' } },
        { id: 'c3' },
      ],
    })
    expect(messages[5]).toEqual({ role: 'tool', tool_call_id: 'c2', content: 'Error: exit status 1' })
    expect(messages[6]).toMatchObject({ role: 'tool', tool_call_id: 'c3', content: expect.stringMatching(/^Error TOOL_NO_RESULT/) })
    expect(rendered.warnings).toMatchObject({
      'unknown-block': 1,
      'missing-attachment': 1,
      // the image in the c1 result: a Chat tool message holds text only
      'unsupported-block': 1,
      'reasoning-dropped': 2,
    })
  })

  it('responses: reasoning item with its id and encrypted content, function_call and function_call_output items, an image in a result', () => {
    const rendered = renderResponses(fixtureContext, { attachments })
    golden('responses', rendered)
    const types = rendered.body.input.map((item) => item.type)
    expect(types).toEqual([
      'message',
      'message',
      'message',
      'reasoning',
      'message',
      'function_call',
      'function_call',
      'function_call',
      'function_call_output',
      'function_call_output',
      'function_call_output',
      'message',
      'message',
    ])
    expect(rendered.body.input[3]).toEqual({
      type: 'reasoning',
      id: 'rs_1',
      summary: [{ type: 'summary_text', text: 'The user wants both files read.' }],
      encrypted_content: 'sig-abc',
    })
    expect(rendered.warnings).toMatchObject({ 'unknown-block': 1, 'missing-attachment': 1, 'reasoning-dropped': 1, 'unsupported-block': 0 })
  })

  it('responses with a previous response: only the messages after the seq it covered, the synthetic result among them', () => {
    const rendered = renderResponses(fixtureContext, { attachments, previousResponse: { id: 'resp_1', throughSeq: 23 } })
    golden('responses-previous', rendered)
    expect(rendered.body.previous_response_id).toBe('resp_1')
    expect(rendered.body.input.map((item) => (item.type === 'function_call_output' ? item.call_id : item.type))).toEqual([
      'c1',
      'c2',
      'c3',
      'message',
      'message',
    ])
    // only the sent messages' warnings: the unsigned reasoning of the last step
    expect(rendered.warnings).toMatchObject({ 'unknown-block': 0, 'reasoning-dropped': 1 })
  })

  it('anthropic: system with a breakpoint, thinking with its signature, image and document blocks, tool results merged into one user message with is_error', () => {
    const rendered = renderAnthropic(fixtureContext, { attachments })
    golden('anthropic', rendered)
    const { body } = rendered
    expect(body.system).toEqual([{ type: 'text', text: 'You are a careful assistant.', cache_control: { type: 'ephemeral' } }])
    // summary + question merged; three results and the next question merged
    expect(body.messages.map((m) => m.role)).toEqual(['user', 'assistant', 'user', 'assistant'])
    expect(body.messages[1]?.content[0]).toEqual({ type: 'thinking', thinking: 'The user wants both files read.', signature: 'sig-abc' })
    expect(body.messages[2]?.content.map((b) => (b.type === 'tool_result' ? `${b.tool_use_id}:${b.is_error === true}` : b.type))).toEqual([
      'c1:false',
      'c2:true',
      'c3:true',
      'text',
    ])
    const marked = JSON.stringify(body).split('"cache_control"').length - 1
    expect(marked).toBeLessThanOrEqual(4)
    expect(rendered.warnings).toMatchObject({ 'unknown-block': 1, 'missing-attachment': 1, 'reasoning-dropped': 1 })
  })
})
