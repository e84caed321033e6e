/*
 * fuzz_s3.c: the readers of an S3 store's answers (sandbox-glue/executor
 * /execd/exec_s3.c) on arbitrary bytes: a ListObjectsV2 page
 * (xd_s3_list_parse) and an element's text (xd_s3_xml_text: an error's
 * Code, a multipart upload's UploadId).  Checked:
 *  - every object read has a key shorter than the input, a size of at
 *    least 0 and an mtime of -1 (unknown, or before the epoch) or more;
 *  - a page said truncated has a token that is not empty (or did not
 *    read: the list would ask for its first page again);
 *  - the text of an element is NUL-terminated inside its buffer and no
 *    longer than the input;
 *  - a second parse gives the same objects (no hidden state).
 */
#include "sluice-config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "sandbox-glue/executor/execd/execd-int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const tags[] = { "Code", "UploadId", "Message",
	    "Key", NULL };
	char tok[1024], tok2[1024], out[64];
	json_t *a = json_array(), *b = json_array(), *o;
	int tr, tr2, rc, rc2;
	size_t i;

	if (a == NULL || b == NULL)
		abort();
	rc = xd_s3_list_parse((const char *)data, size, a, tok, sizeof(tok),
	    &tr);
	rc2 = xd_s3_list_parse((const char *)data, size, b, tok2,
	    sizeof(tok2), &tr2);
	if (rc != rc2 || !json_equal(a, b))
		abort();
	if (rc == 0) {
		if (tr != tr2 || strcmp(tok, tok2) != 0)
			abort();
		if (tr && tok[0] == '\0')
			abort();
		json_array_foreach(a, i, o) {
			const char *k = json_string_value(json_object_get(o,
			    "key"));

			if (k == NULL || strlen(k) >= size + 1 ||
			    json_integer_value(json_object_get(o, "size")) < 0 ||
			    json_integer_value(json_object_get(o, "mtime")) < -1)
				abort();
		}
	}
	for (i = 0; tags[i] != NULL; i++) {
		memset(out, 'x', sizeof(out));
		if (xd_s3_xml_text((const char *)data, size, tags[i], out,
		    sizeof(out)) == 0 && (memchr(out, '\0', sizeof(out)) ==
		    NULL || strlen(out) > size))
			abort();
	}
	json_decref(a);
	json_decref(b);
	return 0;
}
