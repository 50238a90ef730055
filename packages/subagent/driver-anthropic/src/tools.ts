import type { Tool } from '@anthropic-ai/sdk/resources/messages'
import type { SubagentTool } from '@dsh/subagent'

/**
 * The `tools` request parameter: each tool's name, description and JSON
 * Schema as `input_schema` (the keys the API does not accept, `$schema`,
 * dropped; a schema without `type` is an object schema, which the API
 * requires).
 */
export function anthropicTools(tools: readonly SubagentTool[]): Tool[] {
  return tools.map((tool) => {
    const { $schema: _ignored, ...schema } = tool.jsonSchema as Record<string, unknown>
    return { name: tool.name, description: tool.description, input_schema: { ...schema, type: 'object' } }
  })
}
