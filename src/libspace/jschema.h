/* Checks a JSON value against a JSON Schema of the subset the tool schemas
 * of `space mcp` use: type (a name or a list), properties, required,
 * additionalProperties (false or a schema), items, enum, minimum, maximum,
 * minLength, maxLength (in characters), minItems, maxItems, maxProperties,
 * pattern (POSIX extended). Other keywords are ignored. The schema the
 * agent was shown is the one its arguments are held to, so there is no
 * second description of them to drift apart.
 *
 * The value is untrusted (a tool call's arguments); the schema is ours.
 * Nesting deeper than 8 levels of schema is refused. */
#ifndef SPACE_JSCHEMA_H
#define SPACE_JSCHEMA_H
#include <stddef.h>
#include <jansson.h>

/* 0, or -1 with err naming the first offending member and why
 * ("argv[0]: want string", "sandbox: required") */
int jschema_check(const json_t *schema, const json_t *v, char *err, size_t cap);
#endif
