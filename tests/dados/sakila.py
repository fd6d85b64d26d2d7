"""
Um Sakila em miniatura (PostgreSQL, MariaDB e SQLite), para o `descobrir`.

Tem de proposito o que um catalogo de verdade tem e um mapeamento escrito a
mao erra:

    store           o cadastro (uma linha por loja = empresa; store_id e o escopo)
    staff, customer, inventory
                    por loja (store_id); staff.picture e binario
    actor           sem indice em last_update (a sonda varreria)
    inventory       indice (store_id, last_update): last_update nao e a primeira
    film            array (PG text[]) / SET (MariaDB) em special_features;
                    intervalo (PG); ENUM; DOMAIN year (PG); tsvector (PG)
    film_actor      chave primaria composta
    film_text       sem chave primaria e sem coluna de alteracao
    payment         sem coluna de alteracao
    address         espacial (PG point, MariaDB GEOMETRY)
    customer        JSON (PG jsonb)
    customer_list   view com escopo (store_id) e chave pelo nome (id)
    film_list       view de dominio, chave na primeira coluna (fid), com o array

    criar(banco)    monta tudo num BancoDeTeste (tests/apoio/bancos.py)
"""

import datetime

LOJAS = (1, 2)

_POSTGRES = [
    "CREATE TYPE mpaa_rating AS ENUM ('G', 'PG', 'PG-13', 'R', 'NC-17')",
    'CREATE DOMAIN year AS integer CHECK (VALUE >= 1901 AND VALUE <= 2155)',
    'CREATE TABLE store (store_id serial PRIMARY KEY, manager_staff_id int NOT NULL,'
    ' address_id int NOT NULL, last_update timestamp NOT NULL DEFAULT now())',
    'CREATE TABLE staff (staff_id serial PRIMARY KEY, first_name text NOT NULL,'
    ' last_name text NOT NULL, store_id int NOT NULL, email text, active boolean NOT NULL'
    ' DEFAULT true, username text NOT NULL, picture bytea,'
    ' last_update timestamp NOT NULL DEFAULT now())',
    'CREATE INDEX idx_staff_last_update ON staff (last_update)',
    'CREATE TABLE actor (actor_id serial PRIMARY KEY, first_name text NOT NULL,'
    ' last_name text NOT NULL, last_update timestamp NOT NULL DEFAULT now())',
    'CREATE INDEX idx_actor_last_name ON actor (last_name)',
    'CREATE TABLE language (language_id serial PRIMARY KEY, name char(20) NOT NULL,'
    ' last_update timestamp NOT NULL DEFAULT now())',
    'CREATE INDEX idx_language_last_update ON language (last_update)',
    'CREATE TABLE film (film_id serial PRIMARY KEY, title text NOT NULL, description text,'
    ' release_year year, language_id int NOT NULL, rental_duration smallint NOT NULL'
    ' DEFAULT 3, rental_rate numeric(4,2) NOT NULL DEFAULT 4.99, rating mpaa_rating'
    " DEFAULT 'G', special_features text[], fulltext tsvector, rental_period interval,"
    ' last_update timestamp NOT NULL DEFAULT now())',
    'CREATE INDEX idx_film_last_update ON film (last_update)',
    'CREATE TABLE film_actor (actor_id int NOT NULL, film_id int NOT NULL,'
    ' last_update timestamp NOT NULL DEFAULT now(), PRIMARY KEY (actor_id, film_id))',
    'CREATE INDEX idx_film_actor_last_update ON film_actor (last_update)',
    'CREATE TABLE film_text (film_id int NOT NULL, title text NOT NULL, description text)',
    'CREATE TABLE address (address_id serial PRIMARY KEY, address text NOT NULL,'
    ' district text, phone text, location point, last_update timestamp NOT NULL'
    ' DEFAULT now())',
    'CREATE INDEX idx_address_last_update ON address (last_update)',
    'CREATE TABLE customer (customer_id serial PRIMARY KEY, store_id int NOT NULL,'
    ' first_name text NOT NULL, last_name text NOT NULL, email text, activebool boolean'
    ' NOT NULL DEFAULT true, create_date date NOT NULL DEFAULT current_date,'
    ' preferencias jsonb, last_update timestamp DEFAULT now())',
    'CREATE INDEX idx_customer_store ON customer (store_id)',
    'CREATE INDEX idx_customer_last_update ON customer (last_update)',
    'CREATE TABLE inventory (inventory_id serial PRIMARY KEY, film_id int NOT NULL,'
    ' store_id int NOT NULL, last_update timestamp NOT NULL DEFAULT now())',
    'CREATE INDEX idx_inventory_store_upd ON inventory (store_id, last_update)',
    'CREATE TABLE payment (payment_id serial PRIMARY KEY, customer_id int NOT NULL,'
    ' staff_id int NOT NULL, amount numeric(5,2) NOT NULL, payment_date timestamp NOT NULL)',
    "CREATE VIEW customer_list AS SELECT cu.customer_id AS id, cu.first_name || ' ' ||"
    ' cu.last_name AS name, cu.email, cu.store_id, cu.last_update FROM customer cu',
    'CREATE VIEW film_list AS SELECT f.film_id AS fid, f.title, f.rental_rate AS price,'
    ' f.rating, f.special_features FROM film f',
]

_MARIADB = [
    'CREATE TABLE store (store_id INT AUTO_INCREMENT PRIMARY KEY, manager_staff_id INT NOT'
    ' NULL, address_id INT NOT NULL, last_update TIMESTAMP NOT NULL DEFAULT'
    ' CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP)',
    'CREATE TABLE staff (staff_id INT AUTO_INCREMENT PRIMARY KEY, first_name VARCHAR(45) NOT'
    ' NULL, last_name VARCHAR(45) NOT NULL, store_id INT NOT NULL, email VARCHAR(50),'
    ' active TINYINT(1) NOT NULL DEFAULT 1, username VARCHAR(16) NOT NULL, picture BLOB,'
    ' last_update TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP,'
    ' KEY idx_staff_last_update (last_update))',
    'CREATE TABLE actor (actor_id INT AUTO_INCREMENT PRIMARY KEY, first_name VARCHAR(45) NOT'
    ' NULL, last_name VARCHAR(45) NOT NULL, last_update TIMESTAMP NOT NULL DEFAULT'
    ' CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP, KEY idx_actor_last_name (last_name))',
    'CREATE TABLE language (language_id INT AUTO_INCREMENT PRIMARY KEY, name CHAR(20) NOT'
    ' NULL, last_update TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE'
    ' CURRENT_TIMESTAMP, KEY idx_language_last_update (last_update))',
    'CREATE TABLE film (film_id INT AUTO_INCREMENT PRIMARY KEY, title VARCHAR(128) NOT NULL,'
    ' description TEXT, release_year YEAR, language_id INT NOT NULL, rental_duration'
    ' TINYINT UNSIGNED NOT NULL DEFAULT 3, rental_rate DECIMAL(4,2) NOT NULL DEFAULT 4.99,'
    " rating ENUM('G','PG','PG-13','R','NC-17') DEFAULT 'G', special_features"
    " SET('Trailers','Commentaries','Deleted Scenes','Behind the Scenes'),"
    ' last_update TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP,'
    ' KEY idx_film_last_update (last_update))',
    'CREATE TABLE film_actor (actor_id INT NOT NULL, film_id INT NOT NULL, last_update'
    ' TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP,'
    ' PRIMARY KEY (actor_id, film_id), KEY idx_film_actor_last_update (last_update))',
    'CREATE TABLE film_text (film_id INT NOT NULL, title VARCHAR(255) NOT NULL, description TEXT)',
    'CREATE TABLE address (address_id INT AUTO_INCREMENT PRIMARY KEY, address VARCHAR(50)'
    ' NOT NULL, district VARCHAR(20), phone VARCHAR(20), location GEOMETRY,'
    ' last_update TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP,'
    ' KEY idx_address_last_update (last_update))',
    'CREATE TABLE customer (customer_id INT AUTO_INCREMENT PRIMARY KEY, store_id INT NOT'
    ' NULL, first_name VARCHAR(45) NOT NULL, last_name VARCHAR(45) NOT NULL, email'
    ' VARCHAR(50), active TINYINT(1) NOT NULL DEFAULT 1, create_date DATETIME NOT NULL,'
    ' last_update TIMESTAMP NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP,'
    ' KEY idx_customer_store (store_id), KEY idx_customer_last_update (last_update))',
    'CREATE TABLE inventory (inventory_id INT AUTO_INCREMENT PRIMARY KEY, film_id INT NOT'
    ' NULL, store_id INT NOT NULL, last_update TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP'
    ' ON UPDATE CURRENT_TIMESTAMP, KEY idx_inventory_store_upd (store_id, last_update))',
    'CREATE TABLE payment (payment_id INT AUTO_INCREMENT PRIMARY KEY, customer_id INT NOT'
    ' NULL, staff_id INT NOT NULL, amount DECIMAL(5,2) NOT NULL, payment_date DATETIME NOT'
    ' NULL)',
    "CREATE VIEW customer_list AS SELECT cu.customer_id AS id, CONCAT(cu.first_name, ' ',"
    ' cu.last_name) AS name, cu.email, cu.store_id, cu.last_update FROM customer cu',
    'CREATE VIEW film_list AS SELECT f.film_id AS fid, f.title, f.rental_rate AS price,'
    ' f.rating, f.special_features FROM film f',
]

_SQLITE = [
    'CREATE TABLE store (store_id INTEGER PRIMARY KEY, manager_staff_id INTEGER NOT NULL,'
    ' address_id INTEGER NOT NULL, last_update DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP)',
    'CREATE TABLE staff (staff_id INTEGER PRIMARY KEY, first_name VARCHAR(45) NOT NULL,'
    ' last_name VARCHAR(45) NOT NULL, store_id INTEGER NOT NULL, email VARCHAR(50),'
    ' active BOOLEAN NOT NULL DEFAULT 1, username VARCHAR(16) NOT NULL, picture BLOB,'
    ' last_update DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP)',
    'CREATE INDEX idx_staff_last_update ON staff (last_update)',
    'CREATE TABLE actor (actor_id INTEGER PRIMARY KEY, first_name VARCHAR(45) NOT NULL,'
    ' last_name VARCHAR(45) NOT NULL, last_update DATETIME NOT NULL DEFAULT'
    ' CURRENT_TIMESTAMP)',
    'CREATE INDEX idx_actor_last_name ON actor (last_name)',
    'CREATE TABLE language (language_id INTEGER PRIMARY KEY, name CHAR(20) NOT NULL,'
    ' last_update DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP)',
    'CREATE INDEX idx_language_last_update ON language (last_update)',
    'CREATE TABLE film (film_id INTEGER PRIMARY KEY, title VARCHAR(128) NOT NULL,'
    ' description TEXT, release_year INTEGER, language_id INTEGER NOT NULL,'
    ' rental_duration SMALLINT NOT NULL DEFAULT 3, rental_rate DECIMAL(4,2) NOT NULL'
    " DEFAULT 4.99, rating VARCHAR(5) DEFAULT 'G', special_features TEXT,"
    ' last_update DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP)',
    'CREATE INDEX idx_film_last_update ON film (last_update)',
    'CREATE TABLE film_actor (actor_id INTEGER NOT NULL, film_id INTEGER NOT NULL,'
    ' last_update DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP, PRIMARY KEY (actor_id,'
    ' film_id))',
    'CREATE INDEX idx_film_actor_last_update ON film_actor (last_update)',
    'CREATE TABLE film_text (film_id INTEGER NOT NULL, title VARCHAR(255) NOT NULL,'
    ' description TEXT)',
    'CREATE TABLE address (address_id INTEGER PRIMARY KEY, address VARCHAR(50) NOT NULL,'
    ' district VARCHAR(20), phone VARCHAR(20), last_update DATETIME NOT NULL DEFAULT'
    ' CURRENT_TIMESTAMP)',
    'CREATE INDEX idx_address_last_update ON address (last_update)',
    'CREATE TABLE customer (customer_id INTEGER PRIMARY KEY, store_id INTEGER NOT NULL,'
    ' first_name VARCHAR(45) NOT NULL, last_name VARCHAR(45) NOT NULL, email VARCHAR(50),'
    ' active BOOLEAN NOT NULL DEFAULT 1, create_date DATE NOT NULL, last_update DATETIME'
    ' DEFAULT CURRENT_TIMESTAMP)',
    'CREATE INDEX idx_customer_store ON customer (store_id)',
    'CREATE INDEX idx_customer_last_update ON customer (last_update)',
    'CREATE TABLE inventory (inventory_id INTEGER PRIMARY KEY, film_id INTEGER NOT NULL,'
    ' store_id INTEGER NOT NULL, last_update DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP)',
    'CREATE INDEX idx_inventory_store_upd ON inventory (store_id, last_update)',
    'CREATE TABLE payment (payment_id INTEGER PRIMARY KEY, customer_id INTEGER NOT NULL,'
    ' staff_id INTEGER NOT NULL, amount DECIMAL(5,2) NOT NULL, payment_date DATETIME NOT'
    ' NULL)',
    "CREATE VIEW customer_list AS SELECT cu.customer_id AS id, cu.first_name || ' ' ||"
    ' cu.last_name AS name, cu.email, cu.store_id, cu.last_update FROM customer cu',
    'CREATE VIEW film_list AS SELECT f.film_id AS fid, f.title, f.rental_rate AS price,'
    ' f.rating, f.special_features FROM film f',
]

DDL = {'postgres': _POSTGRES, 'mariadb': _MARIADB, 'sqlite': _SQLITE}

QUANDO = datetime.datetime(2026, 9, 1, 10, 0, 0)


def _filmes(tipo):
    """As linhas de film, com os valores que cada banco guarda nas colunas dele."""
    recursos = {
        'postgres': ['Trailers', 'Deleted Scenes'],
        'mariadb': 'Trailers,Deleted Scenes',
        'sqlite': 'Trailers,Deleted Scenes',
    }[tipo]
    linhas = []
    for n in range(1, 7):
        linha = {
            'i': n,
            't': 'FILME %d' % n,
            'd': 'um filme',
            'a': 2006,
            'l': 1,
            'r': '%d.99' % (n % 5),
            'c': 'PG' if n % 2 else 'G',
            's': recursos if n != 3 else None,
            'u': QUANDO,
        }
        if tipo == 'postgres':
            linha['p'] = datetime.timedelta(days=n)
        linhas.append(linha)
    return linhas


def criar(banco):
    """Monta o Sakila em miniatura no BancoDeTeste (o tipo dele escolhe o DDL)."""
    tipo = banco.tipo
    for comando in DDL[tipo]:
        banco.executar(comando)
    ex = banco.executar
    ex(
        'INSERT INTO store (store_id, manager_staff_id, address_id, last_update) VALUES'
        ' (1, 1, 1, :u), (2, 2, 2, :u)',
        {'u': QUANDO},
    )
    for n, loja in ((1, 1), (2, 2)):
        ex(
            'INSERT INTO staff (staff_id, first_name, last_name, store_id, email, username,'
            ' picture, last_update) VALUES (:i, :f, :l, :s, :e, :n, :p, :u)',
            {
                'i': n,
                'f': 'Func',
                'l': 'Número %d' % n,
                's': loja,
                'e': 'f%d@loja.com' % n,
                'n': 'func%d' % n,
                'p': b'\x89PNG\x00\x01',
                'u': QUANDO,
            },
        )
    for n in range(1, 6):
        ex(
            'INSERT INTO actor (actor_id, first_name, last_name, last_update) VALUES'
            ' (:i, :f, :l, :u)',
            {'i': n, 'f': 'ATOR', 'l': 'NUMERO %d' % n, 'u': QUANDO},
        )
    ex(
        "INSERT INTO language (language_id, name, last_update) VALUES (1, 'English', :u),"
        " (2, 'Portugues', :u)",
        {'u': QUANDO},
    )
    extra = ', rental_period' if tipo == 'postgres' else ''
    valor = ', :p' if tipo == 'postgres' else ''
    for linha in _filmes(tipo):
        ex(
            'INSERT INTO film (film_id, title, description, release_year, language_id,'
            ' rental_rate, rating, special_features, last_update%s) VALUES (:i, :t, :d, :a,'
            ' :l, :r, :c, :s, :u%s)' % (extra, valor),
            linha,
        )
    if tipo == 'postgres':
        ex("UPDATE film SET fulltext = to_tsvector('simple', title)")
    for ator in range(1, 6):
        for filme in (1, 2):
            ex(
                'INSERT INTO film_actor (actor_id, film_id, last_update) VALUES (:a, :f, :u)',
                {'a': ator, 'f': filme, 'u': QUANDO},
            )
    for n in range(1, 7):
        ex(
            'INSERT INTO film_text (film_id, title, description) VALUES (:i, :t, :d)',
            {'i': n, 't': 'FILME %d' % n, 'd': 'um filme'},
        )
    lugar = {'postgres': 'CAST(:g AS point)', 'mariadb': 'ST_GeomFromText(:g)'}.get(tipo)
    for n in (1, 2):
        if lugar:
            ex(
                'INSERT INTO address (address_id, address, district, phone, location,'
                ' last_update) VALUES (:i, :a, :d, :f, %s, :u)' % lugar,
                {
                    'i': n,
                    'a': 'Rua %d' % n,
                    'd': 'Centro',
                    'f': '5511',
                    'u': QUANDO,
                    'g': '(1,2)' if tipo == 'postgres' else 'POINT(1 2)',
                },
            )
        else:
            ex(
                'INSERT INTO address (address_id, address, district, phone, last_update)'
                ' VALUES (:i, :a, :d, :f, :u)',
                {'i': n, 'a': 'Rua %d' % n, 'd': 'Centro', 'f': '5511', 'u': QUANDO},
            )
    preferencias = ', preferencias' if tipo == 'postgres' else ''
    valor_pref = ', CAST(\'{"idioma": "pt"}\' AS jsonb)' if tipo == 'postgres' else ''
    for n in range(1, 9):
        ex(
            'INSERT INTO customer (customer_id, store_id, first_name, last_name, email,'
            ' create_date, last_update%s) VALUES (:i, :s, :f, :l, :e, :c, :u%s)'
            % (preferencias, valor_pref),
            {
                'i': n,
                's': LOJAS[n % 2],
                'f': 'CLIENTE',
                'l': 'NUMERO %d' % n,
                'e': 'c%d@x.com' % n,
                'c': datetime.date(2026, 1, n),
                'u': QUANDO,
            },
        )
    for n in range(1, 11):
        ex(
            'INSERT INTO inventory (inventory_id, film_id, store_id, last_update) VALUES'
            ' (:i, :f, :s, :u)',
            {'i': n, 'f': n % 6 + 1, 's': LOJAS[n % 2], 'u': QUANDO},
        )
    for n in range(1, 6):
        ex(
            'INSERT INTO payment (payment_id, customer_id, staff_id, amount, payment_date)'
            ' VALUES (:i, :c, :s, :a, :d)',
            {'i': n, 'c': n, 's': 1, 'a': '%d.99' % n, 'd': QUANDO},
        )
