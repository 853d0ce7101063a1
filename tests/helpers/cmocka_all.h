/* cmocka_all.h - the includes cmocka 1.1.5 needs before <cmocka.h>. */
#ifndef GM_TESTS_CMOCKA_ALL_H
#define GM_TESTS_CMOCKA_ALL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#endif /* GM_TESTS_CMOCKA_ALL_H */
