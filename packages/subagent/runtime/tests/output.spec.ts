import { isDshError } from '@dsh/context'
import { describe, expect, it } from 'vitest'
import { checkOutput, jsonText } from '../src/output.js'

/** The fenced-block rule written as a pattern: what `jsonText` must agree with on ordinary messages. */
const FENCED = /^\s*```(?:json)?\s*\n([\s\S]*?)\n\s*```\s*$/
function byPattern(text: string): string {
  const fenced = FENCED.exec(text)
  return fenced === null ? text : fenced[1]!
}

/** What a text parses to (or that it does not), the only thing the extraction decides. */
function parsed(text: string): string {
  try {
    return JSON.stringify(JSON.parse(text))
  } catch {
    return 'not JSON'
  }
}

const messages = [
  '{"ok": true}',
  '  {"ok": true}  ',
  '```json\n{"ok": true}\n```',
  '```\n{"ok": true}\n```',
  '  ```json  \n\n  {"ok": true}  \n\n  ```  \n',
  '```json\r\n{"ok": true}\r\n```',
  '```json {"ok": true}```',
  '```json\n{"ok": true}```',
  '```json{"ok": true}\n```',
  '```jsonx\n{"ok": true}\n```',
  '```js\n{"ok": true}\n```',
  '```json\n```',
  '```\n\n```',
  '``````',
  '```',
  '```json\n{"a": "```"}\n```',
  '```json\n[1,\n2]\n```\nthat is all',
  'Here it is:\n```json\n{"ok": true}\n```',
  '```json\n{"ok": true}\n```\n```',
  '```\njson\n```',
  '```json\n"json"\n```',
  '\t```json\n\t{"ok": 1}\n\t```\t',
]

describe('outputSchema: the JSON of a final message', () => {
  it.each(messages)('reads %j as the fenced-block rule does', (text) => {
    expect(parsed(jsonText(text))).toBe(parsed(byPattern(text)))
  })

  it('reads an unclosed fence over a long run of blank lines in one pass (a pattern would backtrack for hours)', () => {
    const text = `\`\`\`json\n${'\n'.repeat(200_000)}x`
    expect(jsonText(text)).toBe(text)
    const checked = checkOutput({}, text)
    expect('error' in checked && isDshError(checked.error, 'SUBAGENT_INVALID_OUTPUT')).toBe(true)
    const closed = `\`\`\`json\n${' \n'.repeat(200_000)}{"ok": true}${'\n '.repeat(200_000)}\n\`\`\``
    expect(checkOutput({}, closed)).toEqual({ output: { ok: true } })
  })
})
